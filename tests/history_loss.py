"""Losing committed events behind a store's back, as a failover to a lagging standby does.

Each backend's rows are deleted from outside the store: raw SQL on PostgreSQL, ``sqlite3``
on the SQLite database (a file, or a ``memory://`` store's in-memory database, opened by the
name the store gave it), without telling the store's shell or its memories.
"""

from __future__ import annotations

import sqlite3
from uuid import UUID

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

import actae
from actae.adapters.persistence.recorders import POSTGRES_EVENTS_TABLE
from actae.adapters.persistence.url import parse_store_url


def lose_events_after(store: actae.Store, url: str, aggregate_id: UUID, version: int) -> int:
    """Delete ``aggregate_id``'s events after ``version`` behind the store; how many."""
    parsed = parse_store_url(url)
    if not url.startswith("postgres"):
        database = store._backend.database  # type: ignore[attr-defined]
        with sqlite3.connect(database, uri=True) as conn:
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
