"""Read side of the command model: heads, state versions, event pages, recovery, lineage.

Every read is a fixed number of primary-key lookups, whatever the history's length: a head is the
last event, a state is found through each event's ``state_cursor``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import replace
from typing import TypeVar
from uuid import UUID

from actae.domain.aggregate import DomainEvent, folded, picked
from actae.domain.channel import Channel
from actae.domain.custody import FORGOTTEN, ensure_readable
from actae.domain.errors import CorruptionError, NotFoundError
from actae.domain.operation import Operation
from actae.domain.ports import Clock, Codec, EventLog, OperationRows, Request
from actae.domain.run import Run
from actae.domain.status import run_status
from actae.domain.validation import checksum_of
from actae.domain.values import (
    ChannelEvent,
    ForkReceipt,
    Lineage,
    OperationRecord,
    Receipt,
    Recovery,
    RunInfo,
    RunStatus,
    StateVersion,
)

A = TypeVar("A")
CHANNEL_TOPICS = tuple(
    cls.type_name for cls in (Channel.Opened, Channel.Recorded, Channel.Transitioned)
)


class StoreReader:
    """Answers queries about channels, runs and operations from the event store."""

    def __init__(self, log: EventLog, codec: Codec, clock: Clock) -> None:
        self._log = log
        self._codec = codec
        self._clock = clock

    # -- channel events -------------------------------------------------------------------

    def head_event(self, channel_id: UUID) -> Channel.Event:
        """The last event of a channel (one indexed read)."""
        for event in self._log.stream(channel_id, desc=True, limit=1):
            if isinstance(event, Channel.Event):
                return event
        raise NotFoundError("channel", channel_id)

    def event_at(self, channel_id: UUID, cursor: int) -> Channel.Event:
        """The event at ``cursor``; ``NotFoundError`` names the channel's end if past it."""
        for event in self._log.stream(channel_id, gt=cursor - 1, lte=cursor, limit=1):
            if isinstance(event, Channel.Event):
                return event
            break
        raise self._past_the_end(channel_id, cursor)

    def _past_the_end(self, channel_id: UUID, cursor: int) -> NotFoundError:
        end = self.head_event(channel_id).originator_version
        return NotFoundError("cursor", cursor, f"channel {channel_id} ends at cursor {end}")

    def event_range(
        self, channel_id: UUID, *, after: int, upto: int | None = None, limit: int | None = None
    ) -> list[Channel.Event]:
        """Events with ``after < cursor <= upto`` in cursor order, at most ``limit``."""
        stored = self._log.stream(channel_id, gt=after, lte=upto, limit=limit)
        return [event for event in stored if isinstance(event, Channel.Event)]

    def global_events(self, *, after: int, limit: int) -> list[ChannelEvent]:
        """Channel events of every run in the store's global order, after ``after``."""
        decoded = self._log.in_order(after=after, limit=limit, topics=CHANNEL_TOPICS)
        return [channel_event_of(e, p) for e, p in decoded if isinstance(e, Channel.Event)]

    # -- public queries -------------------------------------------------------------------

    def head(self, channel_id: UUID) -> Receipt:
        """Receipt of the last event on the channel."""
        return receipt_of(self.head_event(channel_id))

    def state_at(self, channel_id: UUID, cursor: int | None = None) -> StateVersion:
        """The state version in force at ``cursor`` (the head when ``None``)."""
        event = self.head_event(channel_id) if cursor is None else self.event_at(channel_id, cursor)
        return self.state_of(event)

    def state_of(self, event: Channel.Event) -> StateVersion:
        """The state in force after ``event``; refused if unreadable or its checksum differs."""
        source = event
        if event.state_cursor != event.originator_version:
            source = self.event_at(event.originator_id, event.state_cursor)
        if not isinstance(source, Channel.Opened | Channel.Transitioned):
            raise CorruptionError(
                f"channel {event.originator_id}",
                f"cursor {source.originator_version} should hold a state version",
            )
        ensure_readable(source, source.run_id)
        actual = checksum_of(self._codec.canonical(source.state))
        if actual != source.state_checksum:
            raise CorruptionError(
                f"state version {source.state_version} of channel {source.originator_id}",
                f"checksum {actual} does not match the recorded {source.state_checksum}",
            )
        return StateVersion(
            channel_id=source.originator_id,
            version=source.state_version,
            cursor=source.originator_version,
            state=source.state,
            checksum=source.state_checksum,
        )

    def events(self, channel_id: UUID, *, after: int, limit: int | None) -> list[ChannelEvent]:
        """Events after cursor ``after``, oldest first, at most ``limit`` of them."""
        stored = self.event_range(channel_id, after=after, limit=limit)
        if not stored and after > self.head_event(channel_id).originator_version:
            raise self._past_the_end(channel_id, after)
        return [channel_event_of(event) for event in stored]

    def recover(self, channel_id: UUID) -> Recovery:
        """State at the head, the recorded events after it, and the run's open effects."""
        head = self.head_event(channel_id)
        state = self.state_of(head)
        tail = self.event_range(channel_id, after=state.cursor, upto=head.originator_version)
        now = self._clock()
        outstanding = [self.operation(key) for key in head.open_effects]
        return Recovery(
            state=state,
            events=[channel_event_of(event) for event in tail],
            head_cursor=head.originator_version,
            outstanding=[effect.info(now) for effect in outstanding if effect is not None],
        )

    # -- runs and operations --------------------------------------------------------------

    def run_aggregate(self, run_id: UUID) -> Run:
        """The run aggregate; a purged run is not found (:meth:`run_or_tombstone` reads it)."""
        run = self.run_or_tombstone(run_id)
        if run.purged_at is not None:
            raise NotFoundError(
                "run", run_id, f"it was purged by retention at {run.purged_at.isoformat()}"
            )
        return run

    def main_head(self, run_id: UUID) -> Channel.Event:
        """The head of the run's main channel, which proves the run exists: one round trip.

        A head at ``Run.channel_for(run_id)`` naming the run is its main channel, so only the run's
        last event is read with it (its tombstone once purged); one elsewhere costs a full read.
        """
        guess = Run.channel_for(run_id)
        last, found = self._log.together([(run_id, True), (guess, True)])
        if last and isinstance(last[0], Run.Purged):
            return self.head_event(self.run_aggregate(run_id).channel_id)  # not found
        if found and isinstance(found[0], Channel.Event) and found[0].run_id == run_id:
            return found[0]
        return self.head_event(self.run_aggregate(run_id).channel_id)

    def run_or_tombstone(self, run_id: UUID) -> Run:
        """The run aggregate, or what its tombstone keeps of it once it was purged."""
        return self.aggregate(run_id, Run)

    def aggregate(self, aggregate_id: UUID, cls: type[A]) -> A:
        """The aggregate ``aggregate_id`` of class ``cls``, from all its events."""
        found = folded(self._log.stream(aggregate_id))
        if not isinstance(found, cls):
            detail = "" if found is None else "that id belongs to something else"
            raise NotFoundError(cls.__name__.lower(), aggregate_id, detail)
        return found

    def run(self, run_id: UUID) -> RunInfo:
        """A run with the current head of its main channel (its tombstone's, once purged)."""
        run = self.run_or_tombstone(run_id)
        if run.tombstone is not None:
            gone = run.tombstone
            info = run_info_of(run, cursor=gone.cursor, state_version=gone.state_version)
            return replace(info, usage=dict(gone.usage), created_at=gone.started_at)
        return self._run_info(run, self.head_event(run.channel_id))

    def run_and_operation(
        self, run_id: UUID, channel_id: UUID, operation_id: str | None
    ) -> tuple[RunInfo, Operation | None]:
        """``run(run_id)`` and ``operation(operation_id)``, in one round trip where it can."""
        requests: list[Request] = [(run_id, False), (channel_id, True)]
        if operation_id is not None:
            requests.append(operation_rows(operation_id))
        run_events, head_events, *operation_events = self._log.together(requests)
        run = folded(run_events)
        if not isinstance(run, Run) or run.channel_id != channel_id:
            return self.run(run_id), self.operation(operation_id)  # its own errors explain
        head = head_events[0] if head_events else None
        if not isinstance(head, Channel.Event):  # pragma: no cover - a run's channel exists
            raise NotFoundError("channel", channel_id)
        operation = None
        if operation_id is not None:
            operation = operation_of(operation_events[0], operation_id)
        return self._run_info(run, head), operation

    def _run_info(self, run: Run, head: Channel.Event) -> RunInfo:
        """The public view of ``run`` whose channel's head is ``head``."""
        info = run_info_of(run, cursor=head.originator_version, state_version=head.state_version)
        info = replace(info, usage=dict(head.usage))
        if info.status is RunStatus.RUNNING and head.open_effects:  # else no effect matters
            now = self._clock()
            found = [self.operation(key) for key in head.open_effects]
            effects = {effect.status(now) for effect in found if effect is not None}
            return replace(info, status=run_status(run.status, effects=effects))
        return info

    def lineage(self, run_id: UUID) -> Lineage:
        """Fork receipts up to the root and down through every descendant (purged or not)."""
        run = self.run_or_tombstone(run_id)
        ancestors: list[ForkReceipt] = []
        current = run
        while current.forked_from is not None:
            ancestors.append(current.forked_from.receipt())
            current = self.run_or_tombstone(current.forked_from.parent_run_id)
        descendants: list[ForkReceipt] = []
        queue = deque(run.forks)
        while queue:
            fork = queue.popleft()
            descendants.append(fork.receipt())
            queue.extend(self.run_or_tombstone(fork.child_run_id).forks)
        return Lineage(
            run=self.run(run_id),
            ancestors=ancestors,
            descendants=descendants,
            children=list(run.children),
        )

    def operation(self, operation_id: str | None) -> Operation | None:
        """The recorded operation for ``operation_id``, if the command ran before."""
        if operation_id is None:
            return None
        (found,) = self._log.together([operation_rows(operation_id)])
        return operation_of(found, operation_id)


def operation_rows(operation_id: str) -> OperationRows:
    """The request for ``operation_id``'s record (:class:`~actae.domain.ports.OperationRows`)."""
    return OperationRows(Operation.id_for(operation_id), operation_id)


def operation_of(events: Sequence[DomainEvent], operation_id: str) -> Operation | None:
    """The operation its record's ``events`` describe (``None``: it never ran)."""
    if events and isinstance(events[0], Channel.Event):
        event = events[0]
        if event.fingerprint is None or event.operation_id != operation_id:
            raise CorruptionError(f"operation {operation_id!r}", "its row is no record of it")
        command = "transition" if isinstance(event, Channel.Transitioned) else "record"
        result = {"cursor": event.originator_version, "state_version": event.state_version}
        executed = Operation.executed(
            operation_id=operation_id,
            command=command,
            fingerprint=event.fingerprint,
            result=result,
            at=event.timestamp,
        )
        events = [executed]
    found = folded(events)
    if found is not None and not isinstance(found, Operation):  # pragma: no cover - uuid5
        raise CorruptionError(f"operation {operation_id!r}", "id holds another aggregate")
    return found


def operation_record_of(operation: Operation | None) -> OperationRecord | None:
    """The public view of a recorded command; ``None`` for none, and for ledger effects."""
    if operation is None or operation.is_effect:
        return None
    return OperationRecord(
        operation_id=operation.operation_id,
        command=operation.command,
        result=operation.recorded_result,
    )


def receipt_of(event: Channel.Event, *, replayed: bool = False) -> Receipt:
    """The receipt proving ``event`` is on its channel."""
    return Receipt(
        channel_id=event.originator_id,
        cursor=event.originator_version,
        state_version=event.state_version,
        operation_id=event.operation_id,
        replayed=replayed,
    )


def channel_event_of(event: Channel.Event, position: int | None = None) -> ChannelEvent:
    """The public view of a stored channel event (``position``: its global position)."""
    withheld = type(event).withheld
    return ChannelEvent(
        position=position,
        channel_id=event.originator_id,
        run_id=event.run_id,
        cursor=event.originator_version,
        kind=event.kind,
        payload=None if withheld else event.payload,
        forgotten=withheld == FORGOTTEN,
        redacted=getattr(event, "redacted", None) or {},
        state_version=event.state_version,
        state_cursor=event.state_cursor,
        operation_id=event.operation_id,
        recorded_at=event.timestamp,
    )


def run_info_of(run: Run, *, cursor: int, state_version: int, replayed: bool = False) -> RunInfo:
    """The public view of a run, with the head values the caller decides to report."""
    same = "channel_id workflow_id agent_id pins deadline parent_run_id waiting retries held"
    return RunInfo(
        **picked(run, f"{same} forgotten_at ended_at purged_at"),
        run_id=run.id,
        cursor=cursor,
        state_version=state_version,
        status=run_status(run.status, forgotten=run.forgotten_at is not None),
        created_at=run.created_on,
        forked_from=None if run.forked_from is None else run.forked_from.receipt(),
        replayed=replayed,
        decisions=dict(run.inbox),
        result=None if run.forgotten_at else run.result,
        error=None if run.forgotten_at else run.error,
        budget=dict(run.budget),
        trace_context=dict(run.trace_context),
    )
