"""SQLite recorder for the event store: eventsourcing's, kept off an async caller's event loop.

sqlite3 has no asyncio interface and its calls block: on the file lock (up to the lock
timeout) and on ``fsync``. Called from an ``AsyncStore`` method (a greenback portal), each
of the recorder's entry points therefore runs in a worker thread while the coroutine waits
(:func:`~actae.adapters.persistence.awaiting.off_the_loop`); a synchronous caller calls
straight through, as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import Notification, StoredEvent
from eventsourcing.sqlite import SQLiteApplicationRecorder

from actae.adapters.persistence.awaiting import off_the_loop


class ActaeSQLiteRecorder(SQLiteApplicationRecorder):
    """eventsourcing's SQLite application recorder; its IO off the event loop in a portal."""

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """Insert events atomically; their positions."""
        return off_the_loop(super().insert_events, stored_events, **kwargs)

    def select_events(
        self,
        originator_id: UUID | str,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
    ) -> Sequence[StoredEvent]:
        """Events of one aggregate."""
        return off_the_loop(
            super().select_events, originator_id, gt=gt, lte=lte, desc=desc, limit=limit
        )

    def select_notifications(
        self,
        start: int | None,
        limit: int,
        stop: int | None = None,
        topics: Sequence[str] = (),
        *,
        inclusive_of_start: bool = True,
    ) -> Sequence[Notification]:
        """Events in global order from ``start``."""
        return off_the_loop(
            super().select_notifications,
            start,
            limit,
            stop,
            topics,
            inclusive_of_start=inclusive_of_start,
        )

    def max_notification_id(self) -> int:
        """The newest event's global position (0 when there is none)."""
        return off_the_loop(super().max_notification_id)
