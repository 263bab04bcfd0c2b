"""Taking turns at changing a store's schema, on a lock only the store's owner can take.

Openers of one store must not migrate it, or create its read models, at once. Not on an
advisory lock, which any role that connects (an analyst's) could take and hold: a turn is
``LOCK TABLE ... IN SHARE UPDATE EXCLUSIVE MODE`` on a table the store owns, which checks
privileges an analyst never has before it waits, and conflicts with itself but not with the
weaker locks any role may hold, so only another turn can hold one up.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from actae.domain.errors import StoreBusyError

DEFAULT_LOCK_WAIT = 30.0
"""Seconds an open waits for its turn by default: a stuck lock is reported while someone watches."""
TURN = "SHARE UPDATE EXCLUSIVE"
BLOCKING_MODES = (
    "ShareUpdateExclusiveLock",
    "ShareLock",
    "ShareRowExclusiveLock",
    "ExclusiveLock",
    "AccessExclusiveLock",
)
"""The table locks (as ``pg_locks`` names them) that a turn waits for."""
DUPLICATE_OBJECT = (
    psycopg.errors.UniqueViolation,
    psycopg.errors.DuplicateTable,
    psycopg.errors.DuplicateSchema,
    psycopg.errors.DuplicateObject,
)
"""What ``CREATE ... IF NOT EXISTS`` raises when a concurrent creator committed first."""
CREATE_ATTEMPTS = 3


def take_turn(conn: psycopg.Connection[Any], table: sql.Identifier, wait: float) -> None:
    """Lock ``table`` for a turn until ``conn``'s transaction ends (``wait`` seconds at most)."""
    name = table.as_string(conn)
    milliseconds = max(1, round(wait * 1000))
    conn.execute(sql.SQL("SET LOCAL lock_timeout = {}").format(sql.Literal(milliseconds)))
    try:
        with conn.transaction():
            conn.execute(sql.SQL("LOCK TABLE {} IN " + TURN + " MODE").format(table))
    except psycopg.errors.LockNotAvailable as error:
        raise StoreBusyError(name, holders(conn, name), wait) from error
    conn.execute("SET LOCAL lock_timeout TO DEFAULT")


def holders(conn: psycopg.Connection[Any], table: str) -> tuple[int, ...]:
    """The other backends holding a lock on ``table`` that a turn would wait for."""
    rows = conn.execute(
        "SELECT DISTINCT pid FROM pg_locks WHERE locktype = 'relation' AND granted "
        "AND relation = to_regclass(%s) AND mode = ANY(%s) AND pid <> pg_backend_pid() "
        "ORDER BY pid",
        (table, list(BLOCKING_MODES)),
    ).fetchall()
    return tuple(int(row[0]) for row in rows)


def create_once(conn: psycopg.Connection[Any], statement: sql.Composed) -> None:
    """Run a ``CREATE ... IF NOT EXISTS`` that other processes may run at the same moment.

    Against a concurrent creator the loser fails on the catalog's unique index; tried again
    (each attempt a savepoint), it finds the winner's object.
    """
    for attempt in range(CREATE_ATTEMPTS):
        try:
            with conn.transaction():
                conn.execute(statement)
            return
        except DUPLICATE_OBJECT:
            if attempt == CREATE_ATTEMPTS - 1:
                raise
