"""Clocks: the database's clock on PostgreSQL, wall time on one host, virtual time in tests.

Leases, retry times, timers and worker advertisements are all decided on the store's clock
(``actae.open(url, clock=...)``). Workers on many hosts compare each other's lease expiries,
so on PostgreSQL that clock is the database server's (:class:`DatabaseClock`): a host whose
own clock is an hour off still agrees with every other worker. SQLite and ``memory://``
stores live on one host, whose wall time serves. See docs/time.md.

Every read of this host's wall clock goes through :func:`wall_clock`, so a test can give
one process a wrong clock by patching that single function.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, LiteralString

import psycopg
from eventsourcing.persistence import PersistenceError

from actae.domain.ports import Clock

Execute = Callable[[LiteralString, Sequence[Any]], list[tuple[Any, ...]]]
"""Runs one statement and returns its rows."""
RESAMPLE_EVERY = 30.0
"""Seconds between two readings of the database's clock (each costs one connection)."""
RESAMPLE_AFTER_FAILURE = 1.0
"""Seconds before trying again when the database could not be read (it may be failing over)."""
SAMPLE_CONNECT_TIMEOUT = 5
"""Seconds a reading may wait for a connection before it counts as failed."""
MAX_HOST_SKEW = 2.0
"""Seconds this host's wall clock may differ from the database's before a worker warns."""


def wall_clock() -> datetime:
    """Wall-clock time of this host, in UTC: the library's only read of the local clock."""
    return datetime.now(UTC)


class ManualClock:
    """A clock that moves only when told to; safe to share between threads.

    For tests in one process: another process cannot see it, so a second process on
    another clock would judge this one's leases on its own time (use :class:`OffsetClock`).
    """

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or wall_clock()
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        """The current (virtual) time."""
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> datetime:
        """Move time forward by ``seconds`` and return the new time."""
        with self._lock:
            self._now += timedelta(seconds=seconds)
            return self._now


class OffsetClock:
    """A base clock plus an offset read from a file: one virtual clock shared by processes.

    Every process of a test (or of the drill) that opens its store with an ``OffsetClock``
    on the same file sees the same virtual time; :meth:`advance` moves it for all of them.
    With ``base=None`` the store supplies its own clock as the base when it opens (the
    database's clock on PostgreSQL), so processes on hosts with skewed clocks still agree.
    """

    def __init__(self, path: str, base: Clock | None = None) -> None:
        self.path = path
        self.base = base

    def offset(self) -> float:
        """Seconds the virtual clock is ahead of its base."""
        try:
            with open(self.path) as file:
                return float(file.read().strip() or 0)
        except FileNotFoundError:
            return 0.0

    def __call__(self) -> datetime:
        """The current virtual time."""
        base = wall_clock if self.base is None else self.base
        return base() + timedelta(seconds=self.offset())

    def advance(self, seconds: float) -> None:
        """Move every process's clock forward (atomic rename)."""
        temporary = f"{self.path}.{os.getpid()}.tmp"
        with open(temporary, "w") as file:
            file.write(repr(self.offset() + seconds))
        os.replace(temporary, self.path)


@dataclass(frozen=True)
class Reading:
    """One reading of the database's clock, pinned to this process's monotonic clock.

    ``database`` is the server's time at ``monotonic`` (the middle of the round trip, so it
    is off by at most half of ``round_trip``); ``skew`` is how far the database's clock is
    ahead of this host's wall clock, in seconds.
    """

    database: datetime
    monotonic: float
    round_trip: float
    skew: float

    def now(self) -> datetime:
        """The database's time now, extrapolated on the monotonic clock."""
        return self.database + timedelta(seconds=time.monotonic() - self.monotonic)


def read_database_clock(conninfo: Mapping[str, str], tries: int = 3) -> Reading:
    """Ask the server for ``clock_timestamp()`` and time the round trip.

    The answer was produced somewhere inside the round trip; taking its middle bounds the
    error by half the round trip (well under a millisecond on a LAN), whatever either
    host's wall clock says. Of a few tries the shortest round trip wins, so a busy moment
    on either host does not widen the bound.
    """
    options: dict[str, Any] = {"connect_timeout": SAMPLE_CONNECT_TIMEOUT, **conninfo}
    with psycopg.connect(**options, autocommit=True) as conn:
        conn.execute("SELECT 1")  # the first statement on a connection pays for set-up

        def execute(statement: LiteralString, params: Sequence[Any]) -> list[tuple[Any, ...]]:
            return conn.execute(statement, params).fetchall()

        return read_clock_through(execute, tries)


def read_clock_through(execute: Execute, tries: int = 3) -> Reading:
    """:func:`read_database_clock` through ``execute`` (a pooled connection, already set up)."""
    readings = [_one_reading(execute) for _ in range(tries)]
    return min(readings, key=lambda reading: reading.round_trip)


def _one_reading(execute: Execute) -> Reading:
    wall_before, before = wall_clock(), time.monotonic()
    rows = execute("SELECT clock_timestamp()", ())
    after, wall_after = time.monotonic(), wall_clock()
    if not rows or not isinstance(rows[0][0], datetime):
        raise psycopg.DataError("clock_timestamp() returned no timestamp")
    database = rows[0][0].astimezone(UTC)
    wall_middle = wall_before + (wall_after - wall_before) / 2
    return Reading(
        database=database,
        monotonic=(before + after) / 2,
        round_trip=after - before,
        skew=(database - wall_middle).total_seconds(),
    )


class DatabaseClock:
    """The PostgreSQL server's clock, read once per :data:`RESAMPLE_EVERY` seconds.

    Between readings time moves on this process's monotonic clock, so asking the time costs
    nothing and a jump of the host's wall clock changes nothing. A background thread takes
    the readings; while the database cannot be reached it keeps the last one and tries
    again every :data:`RESAMPLE_AFTER_FAILURE` seconds, so the first reading after an outage
    (possibly from a promoted replica with its own clock) comes right after a reconnect.
    """

    def __init__(
        self, conninfo: Mapping[str, str], *, resample_every: float = RESAMPLE_EVERY
    ) -> None:
        self._conninfo = dict(conninfo)
        self._resample_every = resample_every
        self.reading = read_database_clock(self._conninfo)  # opening fails if it cannot
        self._read: Callable[[], Reading] = lambda: read_database_clock(self._conninfo)
        self._latest = self.reading.now()
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._sampler = threading.Thread(
            target=self._keep_reading, name="actae database clock", daemon=True
        )
        self._sampler.start()

    def __call__(self) -> datetime:
        """The database's time now; never earlier than a time it gave before.

        A new reading can land a few milliseconds behind the last one (or more, after a
        failover to a server with its own clock); lease and timer arithmetic must not see
        time run backwards.
        """
        now = self.reading.now()
        with self._lock:
            if now < self._latest:
                return self._latest
            self._latest = now
        return now

    @property
    def skew(self) -> float:
        """Seconds the database's clock is ahead of this host's (negative: behind)."""
        return self.reading.skew

    def read_through(self, execute: Execute) -> None:
        """Take the next readings through ``execute``, the store's pool.

        Not a connection of their own: the connection the store keeps when idle serves them.
        """
        self._read = lambda: read_clock_through(execute)

    def close(self) -> None:
        """Stop reading the database's clock; the time goes on from the last reading."""
        self._closed.set()

    def _keep_reading(self) -> None:
        pause = self._resample_every
        while not self._closed.wait(pause):
            try:
                self.reading = self._read()
                pause = self._resample_every
            except (psycopg.Error, OSError, PersistenceError):  # an outage: keep the last one
                pause = RESAMPLE_AFTER_FAILURE


def store_clock(given: Clock | None, conninfo: Mapping[str, str] | None) -> Clock:
    """The clock a store runs on: ``given`` as it is, or based on the store's own clock.

    The store's own clock is the database's on PostgreSQL (``conninfo`` given) and this
    host's wall clock otherwise. An :class:`OffsetClock` without a base gets a copy based
    on it; the caller's object is left unchanged, so it can serve another store.
    """
    if given is not None and not (isinstance(given, OffsetClock) and given.base is None):
        return given
    base: Clock = wall_clock if conninfo is None else DatabaseClock(conninfo)
    return base if given is None else OffsetClock(given.path, base)


def host_skew(clock: Clock) -> float | None:
    """Seconds the database's clock is ahead of this host's; None if ``clock`` is not on it."""
    found = _database_clock(clock)
    return None if found is None else found.skew


def skew_warning(skew: float | None) -> str | None:
    """What a worker logs when this host's clock is far from the database's (else None)."""
    if skew is None or math.isnan(skew) or abs(skew) <= MAX_HOST_SKEW:
        return None
    direction = "behind" if skew > 0 else "ahead of"
    return (
        f"this host's clock is {abs(skew):.1f} s {direction} the database's; leases, timers "
        "and retries use the database's clock, but fix the host's clock (NTP)"
    )


def close_clock(clock: Clock) -> None:
    """Stop a clock's background readings, if it takes any."""
    if (found := _database_clock(clock)) is not None:
        found.close()


def read_clock_with(clock: Clock, execute: Execute) -> None:
    """Let the database's clock under ``clock`` (if any) take its readings through ``execute``."""
    if (found := _database_clock(clock)) is not None:
        found.read_through(execute)


def _database_clock(clock: Clock) -> DatabaseClock | None:
    """The database's clock that ``clock`` is, or runs on under its offsets."""
    while isinstance(clock, OffsetClock) and clock.base is not None:
        clock = clock.base
    return clock if isinstance(clock, DatabaseClock) else None
