"""The events table's ``operation_id`` column: one namespace of operation ids, kept unique.

A row that records an operation carries its id here (the domain says which:
``DomainEvent.stored_operation_id``, and the mapper makes that row a :class:`StoredRecord`):
an Operation's first event (a start's or a fork's record, an effect's registration), or the
channel event of a record or a transition given an ``operation_id``. A unique index over
the rows that carry one (``WHERE operation_id IS NOT NULL``: the other rows cost it nothing)
refuses a second execution in the statement that would write it; a record or a transition
so writes one row instead of two (docs/performance.md, "The operation record: folded or
separate").

The column and its index are part of the baseline schema
(:mod:`actae.adapters.persistence.baseline`).
"""

from __future__ import annotations

from dataclasses import dataclass

from eventsourcing.persistence import StoredEvent


@dataclass(frozen=True)
class StoredRecord(StoredEvent):
    """A stored event whose row records the operation ``operation_id``."""

    operation_id: str = ""


def operation_id_of(stored: StoredEvent) -> str | None:
    """The operation id a row to insert carries, or ``None``."""
    return stored.operation_id if isinstance(stored, StoredRecord) else None


def sqlite_insert_statement(table: str) -> str:
    """The insert of one row, with its operation id."""
    return (
        f"INSERT INTO {table} (originator_id, originator_version, topic, state, operation_id)"  # noqa: S608
        " VALUES (?,?,?,?,?)"
    )


def sqlite_select_statement(table: str) -> str:
    """The row that carries an operation id."""
    return f"SELECT * FROM {table} WHERE operation_id = ?"  # noqa: S608
