"""Recorders with no asyncio interface, kept off an async caller's event loop.

sqlite3 blocks: on the file lock (up to the lock timeout) and on ``fsync``. The in-memory
recorder does not wait on IO, but a caller that awaited it on the loop would never yield:
measured with 32 writers, a ticker on the loop woke 20 ms late at the median, against 5 ms
with the calls in worker threads at the same rate (docs/async.md). So, called from an
``AsyncStore`` method (a greenback portal), each entry point of these recorders runs in a
worker thread while the coroutine waits (:func:`~actae.adapters.persistence.awaiting.
off_the_loop`); a synchronous caller calls straight through, as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import ApplicationRecorder, Notification, StoredEvent
from eventsourcing.popo import POPOApplicationRecorder
from eventsourcing.sqlite import SQLiteApplicationRecorder

from actae.adapters.persistence.awaiting import off_the_loop


class OffTheLoop(ApplicationRecorder):
    """The recorder's entry points, each off the event loop inside a portal.

    Mixed in before an eventsourcing recorder, whose methods ``super()`` reaches (mypy sees
    only the abstract ones of ``ApplicationRecorder``, hence the ``safe-super`` ignores).
    """

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """Insert events atomically; their positions."""
        return off_the_loop(super().insert_events, stored_events, **kwargs)  # type: ignore[safe-super]

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
            super().select_events,  # type: ignore[safe-super]
            originator_id,
            gt=gt,
            lte=lte,
            desc=desc,
            limit=limit,
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
            super().select_notifications,  # type: ignore[safe-super]
            start,
            limit,
            stop,
            topics,
            inclusive_of_start=inclusive_of_start,
        )

    def max_notification_id(self) -> int:
        """The newest event's global position (0, or None in memory, when there is none)."""
        return off_the_loop(super().max_notification_id)  # type: ignore[safe-super,return-value]


class ActaeSQLiteRecorder(OffTheLoop, SQLiteApplicationRecorder):
    """eventsourcing's SQLite application recorder, off the event loop in a portal."""


class ActaeMemoryRecorder(OffTheLoop, POPOApplicationRecorder):
    """eventsourcing's in-memory application recorder, off the event loop in a portal.

    A deleted event (retention's purge) leaves a hole at its position, so that positions
    keep their meaning; reads in global order step over holes.
    """

    def events_after(self, position: int, cap: int) -> int:
        """Events after ``position``, holes not counted, at most ``cap``."""
        with self._database_lock:
            later = self._stored_events[position:]  # position n is at index n - 1
            return min(cap, sum(1 for event in later if event.topic != HOLE.topic))

    def still_stored(self, originator_ids: Sequence[UUID]) -> set[UUID]:
        """Which of these still have events (see :mod:`actae.adapters.persistence.purging`)."""
        with self._database_lock:
            index = self._stored_events_index
            return {i for i in originator_ids if index.get(str(i))}

    def delete_events(
        self, everything_of: Sequence[UUID], history_of: Sequence[UUID], keep_topic: str
    ) -> int:
        """Delete events as :func:`actae.adapters.persistence.purging.delete_events` says."""
        deleted = 0
        with self._database_lock:
            for ids, keep in ((everything_of, None), (history_of, keep_topic)):
                for originator_id in ids:
                    index = self._stored_events_index[str(originator_id)]
                    for version, position in list(index.items()):
                        if keep is not None and self._stored_events[position].topic == keep:
                            continue
                        self._stored_events[position] = HOLE
                        del index[version]
                        deleted += 1
        return deleted

    def select_notifications(
        self,
        start: int | None,
        limit: int,
        stop: int | None = None,
        topics: Sequence[str] = (),
        *,
        inclusive_of_start: bool = True,
    ) -> Sequence[Notification]:
        """Events in global order from ``start``, holes left out (``limit`` counts events)."""
        found: list[Notification] = []
        while len(found) < limit:
            page = super().select_notifications(
                start, limit, stop, topics, inclusive_of_start=inclusive_of_start
            )
            if not page:
                break
            found.extend(n for n in page if n.topic != HOLE.topic)
            start, inclusive_of_start = page[-1].id, False
        return found[:limit]


HOLE = StoredEvent(originator_id=UUID(int=0), originator_version=0, topic="", state=b"")
"""What a deleted event leaves in the in-memory store's list."""
