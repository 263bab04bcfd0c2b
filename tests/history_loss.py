"""Losing committed events behind a store's back, as a failover to a lagging standby does.

Each backend's rows are deleted from outside the store: raw SQL on PostgreSQL, ``sqlite3``
on the SQLite file. The in-memory store has no outside; its recorder's table is the
database, so its rows are removed there (as its own purge does), without telling the
store's shell or its memories.
"""

from __future__ import annotations

import sqlite3
from uuid import UUID

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

import actae
from actae.adapters.persistence.offloaded import HOLE, ActaeMemoryRecorder
from actae.adapters.persistence.recorders import POSTGRES_EVENTS_TABLE
from actae.adapters.persistence.url import parse_store_url


def lose_events_after(store: actae.Store, url: str, aggregate_id: UUID, version: int) -> int:
    """Delete ``aggregate_id``'s events after ``version`` behind the store; how many."""
    if url.startswith("memory"):
        return _lose_in_memory(store._service.recorder, aggregate_id, version)  # type: ignore[arg-type]
    parsed = parse_store_url(url)
    if url.startswith("sqlite"):
        with sqlite3.connect(parsed.sqlite_path or "") as conn:
            deleted = conn.execute(
                "DELETE FROM stored_events WHERE originator_id = ? AND originator_version > ?",
                (aggregate_id.hex, version),
            ).rowcount
        conn.close()
        return deleted
    table = sql.Identifier(parsed.postgres_schema, POSTGRES_EVENTS_TABLE)
    statement = sql.SQL(
        "DELETE FROM {} WHERE originator_id = %s AND originator_version > %s"
    ).format(table)
    with psycopg.connect(make_conninfo(**parsed.postgres_conninfo), autocommit=True) as pg:
        return pg.execute(statement, (aggregate_id, version)).rowcount


def _lose_in_memory(recorder: ActaeMemoryRecorder, aggregate_id: UUID, version: int) -> int:
    deleted = 0
    with recorder._database_lock:
        index = recorder._stored_events_index[str(aggregate_id)]
        for stored_version, position in list(index.items()):
            if stored_version > version:
                recorder._stored_events[position] = HOLE
                del index[stored_version]
                deleted += 1
    return deleted
