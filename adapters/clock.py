"""Clocks: wall time by default, and a manual clock for tests and drills.

Leases, retries and (later) timers read time only through the clock given to
``actae.open(url, clock=...)``, so a test can move hours forward in a millisecond.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta


class ManualClock:
    """A clock that moves only when told to; safe to share between threads."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime.now(UTC)
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
