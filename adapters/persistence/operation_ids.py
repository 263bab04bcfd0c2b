"""The events table's ``operation_id`` column: one namespace of operation ids, kept unique.

A row that records an operation (``DomainEvent.stored_operation_id``; the mapper makes it a
:class:`StoredRecord`) carries its id here. A partial unique index over them refuses a second
execution in the statement that would write it, so a record writes one row, not two
(docs/performance.md, "The operation record: folded or separate").
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
