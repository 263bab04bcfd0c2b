"""What this process saw of each aggregate's history, so it notices a store that holds less.

Cursors and fencing tokens only grow: less than was seen means committed events are gone, and
writing on would build a new history over them. The first read that finds less raises
:class:`HistoryRegressedError` and latches: the process writes no more (docs/outages.md).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain
from typing import Any
from uuid import UUID

from actae.domain.aggregate import DomainEvent
from actae.domain.channel import Channel
from actae.domain.errors import HistoryRegressedError
from actae.domain.operation import Operation
from actae.domain.ports import EventLog, OperationRows, Request

Floor = tuple[int, int]
"""The highest version and fencing token seen of one aggregate (0: none)."""
NOTHING_SEEN: Floor = (0, 0)
DEFAULT_MAX_AGGREGATES = 100_000
"""Aggregates remembered at once (a pair of ints each); the oldest entered are forgotten first."""


class SeenHistory:
    """The highest version, and fencing token, this process saw of each aggregate."""

    def __init__(self, maxsize: int = DEFAULT_MAX_AGGREGATES) -> None:
        self._maxsize = maxsize
        self._floors: dict[UUID, Floor] = {}
        self._lock = threading.Lock()
        self.regressed: HistoryRegressedError | None = None
        """The first regression found: once set, this process writes nothing more."""

    def saw(self, events: Iterable[DomainEvent]) -> None:
        """Remember ``events`` as stored (written or read): one look-up per event, on every IO."""
        floors = self._floors
        with self._lock:
            for event in events:
                aggregate_id, version = event.originator_id, event.originator_version
                token = event.token if isinstance(event, Operation.Claimed) else 0
                known = floors.get(aggregate_id)
                if known is None:
                    if len(floors) >= self._maxsize:
                        del floors[next(iter(floors))]
                    floors[aggregate_id] = (version, token)
                elif version > known[0] or token > known[1]:
                    floors[aggregate_id] = (max(version, known[0]), max(token, known[1]))

    def floor(self, aggregate_id: UUID) -> Floor:
        """(version, fencing token) seen of ``aggregate_id``, taken *before* a read (0: none)."""
        return self._floors.get(aggregate_id, NOTHING_SEEN)

    def ensure_not_behind(self, events: Sequence[DomainEvent], floor: Floor) -> None:
        """Refuse one aggregate's ``events`` (oldest first) below ``floor``; then :meth:`saw`."""
        if not events:
            return
        newest = events[-1]
        seen, granted = floor
        if newest.originator_version < seen:
            self._latch(events, seen, newest.originator_version, "cursor")
        if granted and events[0].originator_version == 1:
            token = max((e.token for e in events if isinstance(e, Operation.Claimed)), default=0)
            if token < granted:
                what = f"fencing token of effect {newest.originator_id}"
                self._latch(events, granted, token, what)

    def forget(self, ids: Iterable[UUID]) -> None:
        """Drop what was seen of aggregates this process purged: a reused id is a new history."""
        with self._lock:
            for aggregate_id in ids:
                self._floors.pop(aggregate_id, None)

    def _latch(self, events: Sequence[DomainEvent], seen: int, found: int, what: str) -> None:
        first = events[0]  # the channel: a channel's own id, or an effect's run's channel
        channel = getattr(first, "channel_id", None)
        if isinstance(first, Channel.Event) or not isinstance(channel, UUID):
            channel = first.originator_id
        error = HistoryRegressedError(channel, seen=seen, found=found, what=what)
        with self._lock:
            if self.regressed is None:
                self.regressed = error
        raise error


def aggregate_of(request: Request) -> UUID:
    """The aggregate whose events a ``together`` request reads first."""
    return request.aggregate_id if isinstance(request, OperationRows) else request[0]


class WatchedLog:
    """An event log whose reads reaching a newest event are checked, and all remembered."""

    def __init__(self, log: EventLog, seen: SeenHistory) -> None:
        self._log = log
        self._seen = seen

    def stream(self, originator_id: UUID, **window: Any) -> Iterator[DomainEvent]:
        """The log's ``stream``, checked when it reads up to the aggregate's newest event."""
        desc = window.get("desc", False)
        newest = window.get("lte") is None and (desc or window.get("limit") is None)  # to the end
        floor = self._seen.floor(originator_id)
        events = list(self._log.stream(originator_id, **window))
        if newest:
            self._seen.ensure_not_behind(events[::-1] if desc else events, floor)
        self._seen.saw(events)
        return iter(events)

    def together(self, requests: Sequence[Request]) -> list[list[DomainEvent]]:
        """The log's ``together``, checked request by request, then remembered in one pass."""
        floors = [self._seen.floor(aggregate_of(request)) for request in requests]
        found = self._log.together(requests)
        for request, floor, events in zip(requests, floors, found, strict=True):
            if events and events[-1].originator_id == aggregate_of(request):
                self._seen.ensure_not_behind(events, floor)
            # else: a record's row on its channel, not that channel's head: only remembered
        self._seen.saw(chain.from_iterable(found))
        return found

    def in_order(
        self, *, after: int, limit: int, topics: Sequence[str]
    ) -> list[tuple[DomainEvent, int]]:
        """The log's ``in_order`` (global order: not a head of anything)."""
        return self._log.in_order(after=after, limit=limit, topics=topics)
