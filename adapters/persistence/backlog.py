"""How many events lie after a position: the read models' lag, counted rather than subtracted.

Positions come in blocks on PostgreSQL and retention leaves holes, so the difference of two
positions is not a number of events. The count stops at ``cap``: a gauge scraped every few
seconds must not scan a backlog of millions each time.
"""

from __future__ import annotations

from psycopg import sql

from actae.adapters.persistence.offloaded import ActaeSQLiteRecorder
from actae.adapters.persistence.postgres import ActaePostgresRecorder

CAP = 1_000_000
"""Events counted at most."""


def postgres_events_after(recorder: ActaePostgresRecorder, position: int, cap: int) -> int:
    """The number of events stored after ``position`` (up to ``cap``), on PostgreSQL."""
    table = sql.Identifier(recorder.datastore.schema, recorder.events_table_name)
    statement = sql.SQL(
        "SELECT count(*) FROM (SELECT 1 FROM {} WHERE notification_id > %s LIMIT %s) AS e"
    ).format(table)
    ((count,),) = recorder._execute(statement.as_string(), [position, cap])
    return int(count)


def sqlite_events_after(recorder: ActaeSQLiteRecorder, position: int, cap: int) -> int:
    """The number of events stored after ``position`` (up to ``cap``), on SQLite."""
    table = recorder.events_table_name
    statement = f"SELECT count(*) FROM (SELECT 1 FROM {table} WHERE rowid > ? LIMIT ?)"  # noqa: S608
    with recorder.datastore.transaction(commit=False) as cursor:
        cursor.execute(statement, (position, cap))
        return int(cursor.fetchone()[0])
