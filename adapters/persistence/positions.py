"""Global positions on PostgreSQL: issued without a lock held across commit, read in order.

Each write statement draws one value ``b`` from the events table's sequence and gives its
``n`` events the positions ``b * BLOCK`` to ``b * BLOCK + n - 1``: concurrent writes never
interleave, and no lock is held across commit, so their commits can share a WAL flush.

The price: a write may commit *after* one that drew a later block, so readers ask the
:class:`Horizon` the highest position below which no event can still appear. It rests on one
fact of PostgreSQL (tested in ``tests/integration/test_positions.py``): ``nextval`` takes
``RowExclusiveLock`` on the sequence, held to the transaction's end, before it allocates.
So: (1) read the sequence's last value ``L``; (2) list the other transactions holding that
lock *and* a write lock on the events table (a mere reader of the sequence holds only the
first, a purge's ``DELETE`` only the second); (3) wait until each has ended. Every block up
to ``L`` is then committed or rolled back. Only this store's writers are waited for, unlike a
bound by the cluster-wide ``pg_snapshot_xmin``. Readers keep the highest horizon (``final``),
so catching up through history costs one survey, not one per page.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Final, LiteralString

from psycopg.sql import SQL, Literal

from actae.adapters.persistence.awaiting import pause

log = logging.getLogger("actae.positions")

BLOCK: Final = 4096
"""Positions per write: at most this many events are written by one statement."""
FIRST_POLL = 0.0001
"""Seconds before looking again whether an in-flight writer has ended; doubled each time."""
LAST_POLL = 0.002
"""The longest wait between two looks (a writer's statement commits in about a ms)."""
SLOW_WRITER = 5.0
"""Seconds of waiting for in-flight writers after which it is logged (once per wait)."""

Execute = Callable[[LiteralString, Sequence[Any]], list[tuple[Any, ...]]]
"""Runs one statement on a pooled autocommit connection; its rows."""


def block_bound(last_value: int, is_called: bool) -> int:
    """The highest position a sequence state ``(last_value, is_called)`` can have issued."""
    drawn = last_value if is_called else last_value - 1
    return drawn * BLOCK + BLOCK - 1 if drawn > 0 else 0


class Horizon:
    """How far a store's positions are final: nothing can appear at or below the horizon.

    ``sequence`` and ``table`` are qualified names; ``execute`` is the recorder's pooled path,
    so an async caller's coroutine waits rather than its thread.
    """

    def __init__(self, execute: Execute, sequence: str, table: str) -> None:
        self._execute = execute
        self.final = 0
        self._lock = threading.Lock()
        writers = SQL(
            "SELECT coalesce(array_agg(l.virtualtransaction), '{{}}') FROM pg_locks l"
            " WHERE l.locktype = 'relation' AND l.relation = {sequence}::regclass"
            " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            " AND l.mode = 'RowExclusiveLock' AND l.granted"
            " AND l.pid IS DISTINCT FROM pg_backend_pid()"
            " AND EXISTS (SELECT FROM pg_locks t WHERE t.virtualtransaction = l.virtualtransaction"
            " AND t.locktype = 'relation' AND t.relation = {table}::regclass"
            " AND t.mode = 'RowExclusiveLock' AND t.granted)"
        ).format(sequence=Literal(sequence), table=Literal(table))
        # The writers are listed by a subquery that refers to the sequence's row, so it is
        # evaluated after that row was read: (1) before (2), as the argument needs.
        self._survey: LiteralString = (
            SQL(
                "SELECT s.last_value, s.is_called,"
                " ({writers} AND s.last_value IS NOT NULL) FROM {seq} s"
            )
            .format(writers=writers, seq=SQL(sequence))
            .as_string()
        )
        self._still: LiteralString = (
            SQL("{writers} AND l.virtualtransaction = ANY(%s)").format(writers=writers).as_string()
        )

    def bound_for(self, lower: int) -> tuple[int, bool]:
        """The horizon to read a page from ``lower`` below, and whether it is a new one.

        Well below the known horizon, that one serves; a page within its last block (a reader
        following live) establishes a new one first, so it costs one survey and one read.
        """
        known = self.final  # read once: another thread may raise it meanwhile
        if lower <= known - BLOCK:
            return known, False
        return self.advance(), True

    def advance(self) -> int:
        """Establish a new horizon (waiting for the writers in flight) and return it."""
        ((last_value, is_called, writers),) = self._execute(self._survey, ())
        bound = block_bound(last_value, is_called)
        if writers:
            self._wait_for(list(writers))
        with self._lock:
            self.final = max(self.final, bound)
            return self.final

    def _wait_for(self, writers: list[str]) -> None:
        """Return once none of ``writers`` (virtual transaction ids) holds the lock any more."""
        started = time.monotonic()
        delay, warned = FIRST_POLL, False
        while writers:
            pause(delay)
            delay = min(delay * 2, LAST_POLL)
            ((still,),) = self._execute(self._still, (writers,))
            writers = list(still)
            if writers and not warned and time.monotonic() - started > SLOW_WRITER:
                warned = True
                log.warning(
                    "readers have waited %.0f s for writers still in flight (virtual "
                    "transactions %s): events after them are delivered once they end",
                    time.monotonic() - started,
                    ", ".join(writers),
                )
