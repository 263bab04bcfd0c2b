"""Reading the next page of events (PostgreSQL) while the projector applies the current one.

Every read stops at the store's horizon (``adapters/persistence/positions.py``), so the page
after a position is the same whenever it is read; it is used only if the projector is still
at the position it was read after.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from eventsourcing.persistence import Notification

Read = Callable[[int], Sequence[Notification]]


class ReadAhead:
    """One page read ahead in a thread of its own; ``close()`` when done."""

    def __init__(self, read: Read) -> None:
        self._read = read
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="actae-read-ahead")
        self._pending: tuple[int, Future[Sequence[Notification]]] | None = None

    def page_after(self, position: int) -> Sequence[Notification]:
        """The page after ``position``: the one read ahead if it was read after it."""
        pending, self._pending = self._pending, None
        if pending is not None and pending[0] == position:
            return pending[1].result()
        return self._read(position)

    def ahead(self, position: int) -> None:
        """Start reading the page after ``position``."""
        self._pending = (position, self._pool.submit(self._read, position))

    def close(self) -> None:
        """Drop any page read ahead, not waiting for its read: a stop must not wait."""
        self._pending = None
        self._pool.shutdown(wait=False, cancel_futures=True)
