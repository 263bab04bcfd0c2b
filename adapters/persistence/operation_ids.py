"""The events table's ``operation_id`` column: one namespace of operation ids, kept unique.

A row that records an operation carries its id here (the domain says which:
``DomainEvent.stored_operation_id``): an Operation's first event (a start, a fork, an
effect, a record or transition written before this column), or the channel event of a record
or a transition given an ``operation_id``. A unique index over the rows that carry one
(``WHERE operation_id IS NOT NULL``: the other rows cost it nothing) refuses a second
execution in the statement that would write it, as the Operation aggregate's primary key did
alone before; a record or a transition so writes one row instead of two (docs/performance.md,
"The operation record: folded or separate").

The column is added to a store of an earlier schema when it is opened (migration 4) by the
recorder's ``create_table``: the column first, with a check that refuses an Operation's first
row without its id (a trigger on SQLite), then the ids of the records already written
(their first events' bodies hold them) in batches, then the index. Each step is skipped once
done, so an interrupted migration is finished by the next open. Processes of the previous
version must be stopped first (docs/operations.md): the check refuses their records, so
they fail instead of writing a second execution the index cannot see.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from eventsourcing.persistence import Mapper, StoredEvent
from psycopg import sql
from psycopg.rows import tuple_row

from actae.adapters.persistence import migrations
from actae.domain.aggregate import DomainEvent
from actae.domain.operation import Operation

log = logging.getLogger("actae.migrations")

COLUMN = "operation_id"
RECORD_TOPICS = (Operation.Executed.type_name, Operation.Registered.type_name)
"""The first events of Operation aggregates: the rows that recorded operations before."""
BACKFILL_BATCH = 10_000
"""Rows of the events table looked at per transaction of the backfill (in position order)."""


@dataclass(frozen=True)
class StoredRecord(StoredEvent):
    """A stored event whose row records the operation ``operation_id``."""

    operation_id: str = ""


def stored_rows(mapper: Mapper[Any], events: Iterable[DomainEvent]) -> list[StoredEvent]:
    """The rows to insert for ``events``: each mapped, with its operation id if it has one."""
    rows: list[StoredEvent] = []
    for event in events:
        stored = mapper.to_stored_event(event)
        key = event.stored_operation_id
        if key is not None:
            stored = StoredRecord(
                stored.originator_id, stored.originator_version, stored.topic, stored.state, key
            )
        rows.append(stored)
    return rows


def operation_id_of(stored: StoredEvent) -> str | None:
    """The operation id a row to insert carries, or ``None``."""
    return stored.operation_id if isinstance(stored, StoredRecord) else None


def index_name(table: str) -> str:
    """The unique index's name for the events table ``table``."""
    return f"{table}_operation_id"


def check_name(table: str) -> str:
    """The name of the check (a trigger on SQLite) that refuses records without their id."""
    return f"{table}_records_carry_ids"


REFUSED = "the first row of an operation must carry its operation_id (schema version 4)"


# -- PostgreSQL -----------------------------------------------------------------------------


def add_to_postgres(conn: psycopg.Connection[Any], schema: str, table: str) -> None:
    """Give the events table its column, its records' ids and the unique index (idempotent).

    ``conn`` autocommits: each step commits on its own, so the table's exclusive lock is
    held only for the catalog change that adds the column and its check, never through the
    backfill; and each lock is waited for at most ``LOCK_TIMEOUT`` (behind a long reader
    the open fails, to be retried, instead of queueing every statement on the table).
    """
    cursor = conn.cursor(row_factory=tuple_row)  # the pool's connections make dict rows
    qualified = sql.Identifier(schema, table)
    index = sql.Identifier(index_name(table))
    name = f"{sql.Identifier(schema).as_string(conn)}.{sql.Identifier(table).as_string(conn)}"
    found = cursor.execute(
        "SELECT EXISTS (SELECT FROM pg_attribute WHERE attrelid = %s::regclass"
        " AND attname = %s AND NOT attisdropped), to_regclass(%s) IS NOT NULL",
        (name, COLUMN, f"{sql.Identifier(schema).as_string(conn)}.{index.as_string(conn)}"),
    ).fetchone()
    has_column, has_index = found if found is not None else (False, False)
    if has_index:
        return
    check = sql.Identifier(check_name(table))
    cursor.execute(sql.SQL("SET lock_timeout = {}").format(sql.Literal(migrations.LOCK_TIMEOUT)))
    try:
        if not has_column:
            cursor.execute(
                sql.SQL(
                    "ALTER TABLE {table} ADD COLUMN operation_id text,"
                    " ADD CONSTRAINT {check} CHECK ({rule}) NOT VALID"
                ).format(table=qualified, check=check, rule=_postgres_rule())
            )
        _backfill_postgres(cursor, qualified)
        cursor.execute(sql.SQL("ALTER TABLE {} VALIDATE CONSTRAINT {}").format(qualified, check))
        cursor.execute(
            sql.SQL(
                "CREATE UNIQUE INDEX IF NOT EXISTS {} ON {} (operation_id)"
                " WHERE operation_id IS NOT NULL"
            ).format(index, qualified)
        )
    finally:
        cursor.execute("RESET lock_timeout")


def _postgres_rule() -> sql.Composed:
    """Every Operation's first row carries its id: a writer that leaves it out is refused.

    An Actae from before schema version 4 still running would write records without ids,
    which the unique index could not see; this check makes its writes fail instead.
    """
    topics = sql.SQL(", ").join(sql.Literal(topic) for topic in RECORD_TOPICS)
    return sql.SQL(
        "originator_version <> 1 OR operation_id IS NOT NULL OR topic NOT IN ({})"
    ).format(topics)


def _backfill_postgres(cursor: psycopg.Cursor[Any], table: sql.Identifier) -> None:
    """Copy each Operation's id from its first event's body into the column, in batches."""
    batch = sql.SQL(
        "WITH batch AS (SELECT notification_id FROM {table} WHERE notification_id > %s"
        " ORDER BY notification_id LIMIT %s), "
        "filled AS (UPDATE {table} t SET operation_id ="
        " convert_from(t.state, 'UTF8')::json ->> 'operation_id'"
        " FROM batch WHERE t.notification_id = batch.notification_id"
        " AND t.originator_version = 1 AND t.topic = ANY(%s) AND t.operation_id IS NULL"
        " RETURNING 1) "
        "SELECT (SELECT max(notification_id) FROM batch), (SELECT count(*) FROM filled)"
    ).format(table=table)
    after, filled, rounds = 0, 0, 0
    while True:
        row = cursor.execute(batch, (after, BACKFILL_BATCH, list(RECORD_TOPICS))).fetchone()
        last, count = row if row is not None else (None, 0)
        if last is None:
            break
        after, filled, rounds = last, filled + count, rounds + 1
        if rounds % 10 == 0:
            log.info("operation ids: %d records filled in, up to position %d", filled, after)
    if filled:
        log.info("operation ids: %d records filled in", filled)


# -- SQLite ---------------------------------------------------------------------------------


def sqlite_has_them(cursor: Any, table: str) -> bool:
    """Whether the table has its unique index and its check already (migration 4 done)."""
    cursor.execute(
        "SELECT count(*) FROM sqlite_master WHERE name IN (?, ?)",
        (index_name(table), check_name(table)),
    )
    return bool(cursor.fetchone()[0] == 2)


def add_to_sqlite(cursor: Any, table: str) -> None:
    """The same for SQLite, in the caller's transaction (one writer: no batches needed).

    The transaction writes first, so that it holds the file's write lock before it looks
    at the table: two processes upgrading one file at once then take turns.
    """
    cursor.execute(f"UPDATE {table} SET topic = topic WHERE 0")  # noqa: S608 - takes the lock
    cursor.execute(f"PRAGMA table_info({table})")
    columns = {row[1] for row in cursor.fetchall()}
    if COLUMN not in columns:
        cursor.execute(f"ALTER TABLE {table} ADD COLUMN operation_id TEXT")
        marks = ",".join("?" * len(RECORD_TOPICS))
        cursor.execute(
            f"UPDATE {table} SET operation_id = json_extract(CAST(state AS TEXT),"  # noqa: S608
            f" '$.operation_id') WHERE originator_version = 1 AND topic IN ({marks})"
            " AND operation_id IS NULL",
            RECORD_TOPICS,
        )
    topics = ", ".join(f"'{topic}'" for topic in RECORD_TOPICS)  # constants: no quotes inside
    cursor.execute(
        f"CREATE TRIGGER IF NOT EXISTS {check_name(table)} BEFORE INSERT ON {table}"
        " WHEN NEW.originator_version = 1 AND NEW.operation_id IS NULL"
        f" AND NEW.topic IN ({topics}) BEGIN SELECT RAISE(ABORT, '{REFUSED}'); END"
    )
    cursor.execute(
        f"CREATE UNIQUE INDEX IF NOT EXISTS {index_name(table)} ON {table} (operation_id)"
        " WHERE operation_id IS NOT NULL"
    )


def sqlite_insert_statement(table: str) -> str:
    """The insert of one row, with its operation id."""
    return (
        f"INSERT INTO {table} (originator_id, originator_version, topic, state, operation_id)"  # noqa: S608
        " VALUES (?,?,?,?,?)"
    )


def sqlite_select_statement(table: str) -> str:
    """The row that carries an operation id."""
    return f"SELECT * FROM {table} WHERE operation_id = ?"  # noqa: S608


def carried_ids(rows: Sequence[StoredEvent]) -> list[str]:
    """The operation ids ``rows`` carry, in order (a repeat among them stays in the list)."""
    return [key for key in map(operation_id_of, rows) if key is not None]
