"""Clocks: wall time by default, and a manual clock for tests and drills.

Leases, retries and (later) timers read time only through the clock given to
``actae.open(url, clock=...)``, so a test can move hours forward in a millisecond.
"""

from __future__ import annotations

import os
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


class OffsetClock:
    """Wall time plus an offset read from a file: one virtual clock shared by processes.

    The drill moves time for every worker process at once by rewriting the file.
    """

    def __init__(self, path: str) -> None:
        self._path = path

    def offset(self) -> float:
        """Seconds the virtual clock is ahead of wall time."""
        try:
            with open(self._path) as file:
                return float(file.read().strip() or 0)
        except FileNotFoundError:
            return 0.0

    def __call__(self) -> datetime:
        """The current virtual time."""
        return datetime.now(UTC) + timedelta(seconds=self.offset())

    def advance(self, seconds: float) -> None:
        """Move every process's clock forward (atomic rename)."""
        temporary = f"{self._path}.tmp"
        with open(temporary, "w") as file:
            file.write(repr(self.offset() + seconds))
        os.replace(temporary, self._path)
