"""Clocks: wall time on one host, virtual time in tests, and what a store's clock is built on.

Leases, retry times, timers and worker advertisements are all decided on the store's clock
(``actae.open(url, clock=...)``). Workers on many hosts compare each other's lease expiries,
so on PostgreSQL that clock is the database server's (``DatabaseClock``, beside the
PostgreSQL recorder in :mod:`actae.adapters.persistence.postgres`): a host whose own clock
is an hour off still agrees with every other worker. SQLite and ``memory://`` stores live on
one host, whose wall time serves. See docs/time.md.

Every read of this host's wall clock goes through :func:`wall_clock`, so a test can give
one process a wrong clock by patching that single function (callers elsewhere call it
through this module, so they see the patch).
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, LiteralString

from actae.domain.ports import Clock

Execute = Callable[[LiteralString, Sequence[Any]], list[tuple[Any, ...]]]
"""Runs one statement and returns its rows."""
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


class SampledClock:
    """A clock kept by readings of another one: the database's (``postgres.DatabaseClock``).

    What a store asks of its clock beyond the time, whoever built it: how far that clock is
    from this host's, where to take the next readings, and when to stop taking them.
    """

    @property
    def skew(self) -> float:
        """Seconds the sampled clock is ahead of this host's (negative: behind)."""
        raise NotImplementedError

    def read_through(self, execute: Execute) -> None:
        """Take the next readings through ``execute`` (the store's pool)."""
        raise NotImplementedError

    def close(self) -> None:
        """Stop taking readings; the time goes on from the last one."""
        raise NotImplementedError


def store_clock(given: Clock | None, own: Callable[[], Clock] | None = None) -> Clock:
    """The clock a store runs on: ``given`` as it is, or based on the store's own clock.

    The store's own clock is the one ``own`` makes (its backend's: the database's on
    PostgreSQL), else this host's wall clock. An :class:`OffsetClock` without a base gets a
    copy based on it; the caller's object is left unchanged, so it can serve another store.
    """
    if given is not None and not (isinstance(given, OffsetClock) and given.base is None):
        return given
    base: Clock = wall_clock if own is None else own()
    return base if given is None else OffsetClock(given.path, base)


def host_skew(clock: Clock) -> float | None:
    """Seconds the database's clock is ahead of this host's; None if ``clock`` is not on it."""
    found = _sampled(clock)
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
    if (found := _sampled(clock)) is not None:
        found.close()


def read_clock_with(clock: Clock, execute: Execute) -> None:
    """Let the sampled clock under ``clock`` (if any) take its readings through ``execute``."""
    if (found := _sampled(clock)) is not None:
        found.read_through(execute)


def _sampled(clock: Clock) -> SampledClock | None:
    """The sampled clock that ``clock`` is, or runs on under its offsets."""
    while isinstance(clock, OffsetClock) and clock.base is not None:
        clock = clock.base
    return clock if isinstance(clock, SampledClock) else None
