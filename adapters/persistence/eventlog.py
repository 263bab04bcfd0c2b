"""The domain's event log (``actae.domain.ports.EventLog``) over an eventsourcing recorder.

The combined read is one statement on PostgreSQL (:class:`PostgresEventLog`), one read per
request on SQLite, where a read costs no round trip.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import ApplicationRecorder, Mapper, StoredEvent

from actae.adapters.persistence.postgres import ActaePostgresRecorder
from actae.domain.aggregate import DomainEvent
from actae.domain.ports import OperationRows, Request


class RecordedEventLog:
    """Decoded events of one application recorder."""

    def __init__(self, mapper: Mapper[UUID], recorder: ApplicationRecorder) -> None:
        self.mapper = mapper
        self.recorder = recorder

    def stream(self, originator_id: UUID, **window: Any) -> Iterator[DomainEvent]:
        """The aggregate's events in ``window`` (the keywords of ``EventLog.stream``)."""
        return map(self._decode, self.recorder.select_events(originator_id, **window))

    def together(self, requests: Sequence[Request]) -> list[list[DomainEvent]]:
        """Several aggregates' events, one list per request (``actae.domain.ports.Request``)."""
        return [self._one(request) for request in requests]

    def _one(self, request: Request) -> list[DomainEvent]:
        if isinstance(request, OperationRows):
            found = list(self.stream(request.aggregate_id))
            if found:
                return found
            row = self.recorder.select_operation_row(request.operation_id)  # type: ignore[attr-defined]
            return [] if row is None else [self._decode(row)]
        originator_id, last = request
        return list(self.stream(originator_id, desc=last, limit=1 if last else None))

    def in_order(
        self, *, after: int, limit: int, topics: Sequence[str]
    ) -> list[tuple[DomainEvent, int]]:
        """Events of the given ``topics`` after global position ``after``, with positions."""
        notifications = self.recorder.select_notifications(
            start=after + 1, limit=limit, topics=topics
        )
        return [(self._decode(notification), notification.id) for notification in notifications]

    def _decode(self, stored: StoredEvent) -> Any:
        return self.mapper.to_domain_event(stored)  # the mapper's own attribute: tests count it


class PostgresEventLog(RecordedEventLog):
    """The event log of the PostgreSQL recorder: the combined read is one statement."""

    recorder: ActaePostgresRecorder

    def together(self, requests: Sequence[Request]) -> list[list[DomainEvent]]:
        """Several aggregates' events in one round trip (a worker asks before every step)."""
        found = self.recorder.select_together(requests)
        return [[self._decode(stored) for stored in events] for events in found]
