"""Replay-to-live subscriptions: catch up from a position, then follow new events.

Pulled by its reader: it fetches everything after its last position, and waits only when
there is nothing new, woken by its process's commits or after a :class:`Backoff`. Writers
notify no one (a ``NOTIFY`` serialises the cluster's commits; docs/performance.md) and no
lock is held between reads, so a slow subscriber cannot slow writers, and history hands over
to live without gap or duplicate (the global one reads below the horizon of
``adapters/persistence/positions.py``). An outage is waited out, logged once.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import Self

from actae.adapters.persistence.awaiting import in_portal, pause
from actae.adapters.persistence.outages import Outage, is_transient, ride_out
from actae.domain.values import ChannelEvent

log = logging.getLogger("actae.subscription")

Fetch = Callable[[int], list[ChannelEvent]]

FIRST_WAIT = 0.001
"""Seconds a reader waits after its first empty look; doubled after each further one."""


def pausing(stopped: threading.Event) -> Callable[[float], None]:
    """A wait between attempts: until ``stopped`` in a thread; in a portal, a plain sleep."""

    def wait(seconds: float) -> None:
        if in_portal():
            pause(seconds)
        else:
            stopped.wait(seconds)

    return wait


class Backoff:
    """How long a reader waits before looking again: short while events flow, long when idle.

    Each empty look doubles the wait, up to ``longest``; an event makes it short again.
    """

    def __init__(self, longest: float, first: float = FIRST_WAIT) -> None:
        self.longest = longest
        self._first = min(first, longest)
        self._next = self._first

    def wait(self) -> float:
        """The next wait, in seconds (each call after an empty look: twice the one before)."""
        current = self._next
        self._next = min(current * 2, self.longest)
        return current

    def arrived(self) -> None:
        """An event arrived: the next wait is short again."""
        self._next = self._first


class Waiter:
    """Blocks until new events may exist, or the timeout passes; this one never blocks.

    As ``Unwaited``: for an ``AsyncSubscription``, whose own waiter awaits instead.
    """

    def wait(self, timeout: float) -> None:
        """Return early when woken (this one: at once)."""

    def wake(self) -> None:
        """Wake a blocked ``wait`` (used by ``stop()``)."""

    def close(self) -> None:
        """Release resources."""


Unwaited = Waiter


class Commits:
    """The commits of this process, counted under a condition.

    Counted, not only notified: a commit between a reader's empty look and its wait makes
    that wait return at once. ``wake`` counts too.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.changed = threading.Condition(self._lock)
        self.count = 0
        self.waiting = 0
        """Readers in :meth:`ConditionWaiter.wait` now (changed under the lock)."""

    def committed(self) -> None:
        """A commit of this process: wake every waiting reader (every write passes here)."""
        with self._lock:
            self.count += 1
            if self.waiting:
                self.changed.notify_all()

    wake = committed


class ConditionWaiter(Waiter):
    """Waits on the store's in-process commits; the reader's backoff covers other processes."""

    def __init__(self, commits: Commits) -> None:
        self._commits = commits
        self._seen = commits.count

    def wait(self, timeout: float) -> None:
        """Sleep until this process commits (or committed since the last wait), or ``timeout``."""
        commits = self._commits
        with commits.changed:
            commits.waiting += 1
            try:
                commits.changed.wait_for(lambda: commits.count != self._seen, timeout)
            finally:
                commits.waiting -= 1
            self._seen = commits.count

    def wake(self) -> None:
        """Wake the waiting reader."""
        self._commits.wake()


class Subscription:
    """An iterator of channel events: stored history first, then live, until ``stop()``.

    ``position`` is the last delivered position (a channel's cursor, or a global position):
    a new subscription from it continues exactly there.
    """

    def __init__(
        self,
        fetch: Fetch,
        waiter: Waiter,
        *,
        after: int,
        position_of: Callable[[ChannelEvent], int],
        poll_interval: float,
    ) -> None:
        self._fetch = fetch
        self._waiter = waiter
        self._position_of = position_of
        self._backoff = Backoff(poll_interval)
        self._buffer: deque[ChannelEvent] = deque()
        self._stopped = threading.Event()
        self.position = after
        self.outage = Outage("actae subscription", log.warning)

    def __iter__(self) -> Iterator[ChannelEvent]:
        return self

    def __next__(self) -> ChannelEvent:
        while not self._stopped.is_set():
            event = self.take()
            if event is not None:
                return event
            self._waiter.wait(self.next_wait())
        raise StopIteration

    @property
    def stopped(self) -> bool:
        """Whether ``stop()`` was called."""
        return self._stopped.is_set()

    def buffered(self) -> ChannelEvent | None:
        """The next event if it was fetched already (no IO), else ``None``."""
        if not self._buffer:
            return None
        event = self._buffer.popleft()
        self.position = self._position_of(event)
        return event

    def take(self) -> ChannelEvent | None:
        """The next event, fetching a batch if none is buffered; ``None`` if there is none yet."""
        if not self._buffer:
            self._buffer.extend(self._next_batch())
            if self._buffer:
                self._backoff.arrived()
        return self.buffered()

    def next_wait(self) -> float:
        """Seconds to wait before the next look, after one that found nothing."""
        return self._backoff.wait()

    def _next_batch(self) -> list[ChannelEvent]:
        """The events after ``position``, waited through database outages ([] if stopped)."""
        try:
            return ride_out(
                lambda: self._fetch(self.position),
                self.outage,
                give_up=self._stopped.is_set,
                sleep=pausing(self._stopped),
            )
        except Exception as error:
            if self._stopped.is_set() and is_transient(error):
                return []
            raise

    def stop(self) -> None:
        """End the iteration (from any thread); a blocked ``next()`` returns promptly."""
        self._stopped.set()
        self._waiter.wake()

    def close(self) -> None:
        """Stop and release what the waiter holds."""
        self.stop()
        self._waiter.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
