"""Deleting a purged run's events: the one place Actae removes rows from its event store.

Retention (:mod:`actae.domain.keeping`) first appends the run's tombstone; only then are the
events it replaces deleted. Positions stay monotonic: PostgreSQL's sequence never goes back,
and on SQLite, which gives a new row the largest ``rowid`` plus one, the row with the largest
``rowid`` is never deleted (at most it spares a write newer than the tombstone).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple
from uuid import UUID

from psycopg import sql

from actae.adapters.persistence.offloaded import ActaeSQLiteRecorder
from actae.adapters.persistence.postgres import ActaePostgresRecorder


def postgres_still_stored(recorder: ActaePostgresRecorder, ids: Sequence[UUID]) -> set[UUID]:
    """Which of ``ids`` still have events: one query per 500 ids, not one each."""
    table = sql.Identifier(recorder.datastore.schema, recorder.events_table_name)
    statement = sql.SQL(
        "SELECT DISTINCT originator_id FROM {} WHERE originator_id = ANY(%s)"
    ).format(table)
    found: set[UUID] = set()
    with recorder.datastore.transaction(commit=False) as cursor:
        for start in range(0, len(ids), 500):
            cursor.execute(statement, (list(ids[start : start + 500]),))
            found.update(UUID(str(row["originator_id"])) for row in cursor.fetchall())
    return found


def sqlite_still_stored(recorder: ActaeSQLiteRecorder, ids: Sequence[UUID]) -> set[UUID]:
    """Which of ``ids`` still have events (500 ids a query: SQLite's limit on parameters)."""
    table = recorder.events_table_name
    found: set[UUID] = set()
    with recorder.datastore.transaction(commit=False) as cursor:
        for start in range(0, len(ids), 500):  # SQLite's limit on parameters
            part = [i.hex for i in ids[start : start + 500]]
            marks = ", ".join("?" * len(part))
            statement = (
                f"SELECT DISTINCT originator_id FROM {table} WHERE originator_id IN ({marks})"  # noqa: S608
            )
            cursor.execute(statement, part)
            found.update(UUID(str(row[0])) for row in cursor.fetchall())
    return found


def postgres_delete_events(
    recorder: ActaePostgresRecorder,
    everything_of: Sequence[UUID],
    history_of: Sequence[UUID],
    keep_topic: str,
) -> int:
    """Delete the events of ``everything_of``, and of ``history_of`` all but ``keep_topic``."""
    table = sql.Identifier(recorder.datastore.schema, recorder.events_table_name)
    statement = sql.SQL(
        "DELETE FROM {} WHERE originator_id = ANY(%s) OR (originator_id = ANY(%s) AND topic <> %s)"
    ).format(table)
    with recorder.datastore.transaction(commit=True) as cursor:
        cursor.execute(statement, (list(everything_of), list(history_of), keep_topic))
        return cursor.rowcount


def sqlite_delete_events(
    recorder: ActaeSQLiteRecorder,
    everything_of: Sequence[UUID],
    history_of: Sequence[UUID],
    keep_topic: str,
) -> int:
    """As on PostgreSQL; the row with the largest ``rowid`` stays (see above)."""
    table = recorder.events_table_name
    deleted = 0
    with recorder.datastore.transaction(commit=True) as cursor:
        for ids, keep in ((everything_of, None), (history_of, keep_topic)):
            for start in range(0, len(ids), 500):  # SQLite's limit on parameters
                part = [i.hex for i in ids[start : start + 500]]
                marks = ", ".join("?" * len(part))
                where = f"originator_id IN ({marks})" + ("" if keep is None else " AND topic <> ?")
                where += f" AND rowid < (SELECT max(rowid) FROM {table})"  # noqa: S608
                params = [*part] if keep is None else [*part, keep]
                statement = f"DELETE FROM {table} WHERE {where} RETURNING 1"  # noqa: S608
                cursor.execute(statement, params)
                deleted += len(cursor.fetchall())
    return deleted


class Purging(NamedTuple):
    """A purge's deletes, and the look for what is left, in one database's SQL."""

    delete_events: Callable[[Any, Sequence[UUID], Sequence[UUID], str], int]
    still_stored: Callable[[Any, Sequence[UUID]], set[UUID]]


POSTGRES = Purging(postgres_delete_events, postgres_still_stored)
SQLITE = Purging(sqlite_delete_events, sqlite_still_stored)
