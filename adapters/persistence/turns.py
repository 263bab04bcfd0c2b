"""Taking turns at changing a store's schema, on a lock only the store's owner can take.

Processes that open one store at once must not migrate it, or create its read models, at
the same time. Not on an advisory lock: ``pg_advisory_lock`` needs no privilege at all, so
any role that can connect (an analyst's, say) could take the key first and hold every
process's open for as long as it liked. A turn is a lock on a table the store owns, taken
with ``LOCK TABLE ... IN SHARE UPDATE EXCLUSIVE MODE``:

* ``LOCK TABLE`` checks the privileges before it waits, and every mode above ``ROW
  EXCLUSIVE`` needs ``UPDATE``, ``DELETE`` or ``TRUNCATE`` on the table, which an analyst
  role never has on Actae's own tables (:mod:`actae.adapters.readside.grants`);
* any role that may use the schema can still *hold* the weaker locks a statement takes
  before its privileges are checked (an ``INSERT`` prepared with ``PREPARE`` in an open
  transaction keeps ``ROW EXCLUSIVE``); ``SHARE UPDATE EXCLUSIVE`` is the one mode that
  conflicts with itself and with none of those, so only another turn can hold one up.

A turn waits at most ``wait`` seconds (``lock_timeout``), then gives up with
:class:`~actae.domain.errors.StoreBusyError` naming the backends that held it.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from actae.domain.errors import StoreBusyError

DEFAULT_LOCK_WAIT = 30.0
"""Seconds an open waits for its turn when the URL gives no ``lock_wait``: long enough for
another process's first open or a small migration, short enough that a stuck lock is
reported while someone is still watching."""
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
    """Lock ``table`` for a turn until the transaction ``conn`` is in ends.

    Raises :class:`StoreBusyError` after ``wait`` seconds; the transaction can go on (the
    failed wait is rolled back to a savepoint) but the caller is expected to end it.
    """
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

    PostgreSQL's ``IF NOT EXISTS`` is not safe against a concurrent creator: the loser
    fails on the catalog's unique index instead. Tried again, it finds the winner's object.
    Inside a transaction, each attempt is a savepoint.
    """
    for attempt in range(CREATE_ATTEMPTS):
        try:
            with conn.transaction():
                conn.execute(statement)
            return
        except DUPLICATE_OBJECT:
            if attempt == CREATE_ATTEMPTS - 1:
                raise
