"""Stored event rows changed behind the store's back, as the database's own files would be.

A test flips one byte of one row's body where the backend keeps it: in the SQLite database
through ``sqlite3`` (a file, or the in-memory database of a ``memory://`` store, which a
connection of this process opens by name), and on PostgreSQL with an ``UPDATE ... SET state
= overlay(...)``. Nothing of Actae is asked to do it.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from typing import Any
from uuid import UUID

import psycopg
from eventsourcing.persistence import StoredEvent
from psycopg import sql

from actae.adapters.persistence.codec import stamped, verified
from tests.custody.sealed import base_dsn, schema_of


@dataclasses.dataclass(frozen=True)
class Row:
    """Where a stored body is: its aggregate, version, topic, and the body."""

    originator_id: UUID
    version: int
    topic: str
    state: bytes


def rows_of(store: Any, url: str) -> list[Row]:
    """Every stored event row of the store at ``url`` (``store`` is its open face)."""
    if not url.startswith("postgres"):
        found = _lite(
            store, url, "SELECT originator_id, originator_version, topic, state FROM stored_events"
        )
        return [Row(UUID(hex=str(o)), v, t, bytes(s)) for o, v, t, s in found]
    with psycopg.connect(base_dsn(url)) as conn:
        query = sql.SQL(
            "SELECT originator_id, originator_version, topic, state FROM {}.actae_events"
        ).format(sql.Identifier(schema_of(url)))
        return [Row(o, v, t, bytes(s)) for o, v, t, s in conn.execute(query)]


def flip(store: Any, url: str, topic: str, marker: bytes) -> Row:
    """Flip the last byte of ``marker`` in the one row of ``topic`` whose body holds it."""
    (row,) = [r for r in rows_of(store, url) if r.topic.endswith(topic) and marker in r.state]
    offset = row.state.index(marker) + len(marker) - 1
    flip_at(store, url, row, offset)
    return row


def flip_at(store: Any, url: str, row: Row, offset: int, mask: int = 0x01) -> None:
    """XOR the byte at ``offset`` of ``row``'s stored body with ``mask``, in place."""
    changed = bytes([row.state[offset] ^ mask])
    flipped = row.state[:offset] + changed + row.state[offset + 1 :]
    if not url.startswith("postgres"):
        _lite(
            store,
            url,
            "UPDATE stored_events SET state = ? WHERE originator_id = ? AND originator_version = ?",
            flipped,
            row.originator_id.hex,
            row.version,
        )
        return
    with psycopg.connect(base_dsn(url)) as conn:
        statement = sql.SQL(
            "UPDATE {}.actae_events SET state = overlay(state placing %s from %s for 1)"
            " WHERE originator_id = %s AND originator_version = %s"
        ).format(sql.Identifier(schema_of(url)))
        conn.execute(statement, (changed, offset + 1, row.originator_id, row.version))


def _lite(store: Any, url: str, statement: str, *params: Any) -> list[Any]:
    """``statement`` run on the store's SQLite database, committed; its rows."""
    database = url.removeprefix("sqlite:///").split("?")[0]
    if url.startswith("memory"):
        database = store._backend.database  # named by the store: a new one each open
    db = sqlite3.connect(database, uri=True)
    try:
        with db:
            return db.execute(statement, params).fetchall()
    finally:
        db.close()


def rewritten(topic: str, originator_id: UUID, version: int, state: bytes, change: Any) -> bytes:
    """``change(body)`` stamped with a valid checksum: a rewrite that knows the scheme.

    For the guards behind the body's checksum (a state's own checksum, a sealed payload's
    associated data): they must still refuse a row rewritten consistently.
    """
    body = verified(StoredEvent(originator_id, version, topic, state))
    return stamped(topic, originator_id, version, change(body))
