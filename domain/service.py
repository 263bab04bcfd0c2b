"""The command-side application service: start, record, transition, fork.

Every command follows the same order, and the order is the guarantee:

1. validate all input (nothing read, nothing written on failure);
2. check ``expected_version``/``expected_cursor`` against the channel head (for ``record`` and
   ``transition``, the head this process last saw, see :mod:`actae.domain.heads`);
3. save the channel event, any other aggregate events and the operation record in one
   transaction.

Anything refused on the way is explained from durable records before it is reported: a
failed check or a refused save looks up the ``operation_id`` first, so a repeat with the same
content returns the original result (``replayed=True``; a retry after a crash carries stale
expected values by construction) and different content is an ``OperationConflictError``;
only then is it a ``ConflictError`` against the head as stored. A command that succeeds has
therefore read nothing: the operation record's primary key refuses a second execution inside
the same transaction that would have written it. (``start_run`` and ``fork``, which read a
parent run anyway, look the operation up first.)
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, NoReturn
from uuid import UUID

from eventsourcing.application import Application
from eventsourcing.persistence import IntegrityError
from eventsourcing.utils import Environment, EnvType

from actae.domain.aggregate import Aggregate, DomainEvent
from actae.domain.channel import Channel, ChannelHead
from actae.domain.errors import ConflictError
from actae.domain.forking import ForkCommands
from actae.domain.heads import HeadCache
from actae.domain.ledger import Ledger
from actae.domain.lifecycle import Lifecycle
from actae.domain.operation import Operation
from actae.domain.ports import Clock, Codec
from actae.domain.reader import StoreReader, receipt_of
from actae.domain.starting import StartCommands
from actae.domain.validation import (
    DEFAULT_MAX_DOCUMENT_BYTES,
    Document,
    fingerprint,
    optional_text,
    require_amounts,
    require_document,
    require_int,
    require_text,
    require_uuid,
)
from actae.domain.values import Receipt


class ActaeService(StartCommands, ForkCommands, Application[UUID]):
    """Commands against runs and channels, with idempotency and optimistic concurrency."""

    name = "actae"

    def __init__(
        self,
        env: EnvType,
        *,
        codec: Codec,
        clock: Clock,
        max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES,
        draw: Callable[[], float] = random.random,
    ) -> None:
        self.codec = codec
        self.clock = clock
        self.max_document_bytes = max_document_bytes
        super().__init__(env)
        if self.repository.cache is not None or self.snapshots is not None:
            raise ValueError("ActaeService.save maintains no aggregate cache and no snapshots")
        self.written = threading.Condition()
        self.reader = StoreReader(self.events, self.repository, codec, clock)
        self.heads = HeadCache(self.reader.head_event)
        self.lifecycle = Lifecycle(
            save=lambda *aggregates: self.save(*aggregates),  # noqa: PLW0108 - late-bound
            reader=self.reader,
            clock=clock,
            codec=codec,
            max_document_bytes=max_document_bytes,
        )
        self.ledger = Ledger(
            save=lambda *aggregates: self.save(*aggregates),  # noqa: PLW0108 - late-bound
            reader=self.reader,
            heads=self.heads,
            clock=clock,
            codec=codec,
            draw=draw,
            max_document_bytes=max_document_bytes,
        )

    def save(self, *objs: Any, **kwargs: Any) -> Any:
        """Write the pending events of aggregates (and bare events) together; their positions.

        Then remembers the new channel heads and wakes this process's subscribers, who
        re-read the store. eventsourcing's ``Application.save`` tells aggregates from events
        with runtime protocol checks (costly on every write) and wraps every stored event in
        ``Recording`` and ``Notification`` objects that nothing here reads. Everything saved
        here is one of our aggregates or events, no aggregate cache or snapshotting is
        configured (checked in ``__init__``) and no process application follows (its
        ``_notify`` hook is empty), so the events go to the mapper and the recorder directly.
        """
        events: list[Any] = []  # our events; eventsourcing types them as protocols
        for obj in objs:
            if isinstance(obj, Aggregate):
                events.extend(obj.collect_events())
            elif isinstance(obj, DomainEvent):
                events.append(obj)
            else:
                raise TypeError(f"cannot save a {type(obj).__name__}: not an Actae aggregate")
        positions = self.recorder.insert_events(
            [self.mapper.to_stored_event(event) for event in events], **kwargs
        )
        for event in events:
            if isinstance(event, Channel.Event):
                self.heads.put(event)
        with self.written:
            self.written.notify_all()
        return positions

    def construct_env(self, name: str, env: EnvType | None = None) -> Environment:
        """Configure from the given env only: the store URL decides, never ``os.environ``."""
        return Environment(name, {**type(self).env, **(env or {})})

    # -- commands -------------------------------------------------------------------------

    def record(
        self,
        channel_id: UUID | str,
        *,
        kind: str,
        payload: dict[str, Any],
        expected_cursor: int,
        operation_id: str | None = None,
        usage: Mapping[str, float] | None = None,
    ) -> Receipt:
        """Append a recorded result to the channel; the state version stays as it is.

        ``usage`` (e.g. ``{"tokens": 812, "cost": 0.02}``) adds to the run's running totals,
        which budgets are checked against.
        """
        cid = require_uuid("channel_id", channel_id)
        kind = require_text("kind", kind)
        body = self._document("payload", payload)
        spent = require_amounts("usage", usage)
        expected_cursor = require_int("expected_cursor", expected_cursor, minimum=1)
        operation_id = optional_text("operation_id", operation_id)
        usage_part = (str(sorted(spent.items())),) if spent else ()  # old fingerprints stay valid
        content = fingerprint("record", str(cid), kind, body.checksum, *usage_part)
        head = self._head_at(cid, operation_id, content, None, expected_cursor)
        if isinstance(head, Receipt):
            return head
        event = Channel.recorded(
            head,
            kind=kind,
            payload=body.value,
            operation_id=operation_id,
            at=self.clock(),
            usage=spent,
        )
        return self._append(event, operation_id, "record", content, None, expected_cursor)

    def transition(
        self,
        channel_id: UUID | str,
        *,
        kind: str,
        payload: dict[str, Any],
        state: dict[str, Any],
        expected_version: int,
        expected_cursor: int,
        operation_id: str | None = None,
    ) -> Receipt:
        """Append an event and the state version it creates, atomically."""
        cid = require_uuid("channel_id", channel_id)
        kind = require_text("kind", kind)
        body = self._document("payload", payload)
        document = self._document("state", state)
        expected_version = require_int("expected_version", expected_version, minimum=1)
        expected_cursor = require_int("expected_cursor", expected_cursor, minimum=1)
        operation_id = optional_text("operation_id", operation_id)
        content = fingerprint("transition", str(cid), kind, body.checksum, document.checksum)
        head = self._head_at(cid, operation_id, content, expected_version, expected_cursor)
        if isinstance(head, Receipt):
            return head
        event = Channel.transitioned(
            head,
            kind=kind,
            payload=body.value,
            state=document.value,
            state_checksum=document.checksum,
            operation_id=operation_id,
            at=self.clock(),
        )
        return self._append(
            event, operation_id, "transition", content, expected_version, expected_cursor
        )

    def _head_at(
        self,
        channel_id: UUID,
        operation_id: str | None,
        content: str,
        expected_version: int | None,
        expected_cursor: int,
    ) -> ChannelHead | Receipt:
        """The channel's head if it is the one the caller expects, or the replay of an earlier run.

        The head comes from the per-process guess when there is one (no read). A mismatch is
        checked against the operation record first, because a retried command carries stale
        expected values by construction, and then against the head as stored.
        """
        guess = self.heads.get(channel_id)
        head = guess or self.heads.reread(channel_id)
        try:
            head.ensure_at(expected_version=expected_version, expected_cursor=expected_cursor)
        except ConflictError:
            original = self._recorded(operation_id, content)
            if original is not None:
                return self._replayed_receipt(channel_id, original)
            if guess is None:
                raise
            head = self.heads.reread(channel_id)
            head.ensure_at(expected_version=expected_version, expected_cursor=expected_cursor)
        return head

    def _append(
        self,
        event: Channel.Event,
        operation_id: str | None,
        command: str,
        content: str,
        expected_version: int | None,
        expected_cursor: int,
    ) -> Receipt:
        """Save a channel's new event; a lost race becomes a replay or a ConflictError."""
        receipt = receipt_of(event)
        result = {"cursor": receipt.cursor, "state_version": receipt.state_version}
        try:
            winner = self._save([event], operation_id, command, content, result, event.timestamp)
        except IntegrityError as refusal:
            self._explain(
                self.heads.reread(event.originator_id), refusal, expected_version, expected_cursor
            )
        if winner is not None:
            return self._replayed_receipt(event.originator_id, winner)
        return receipt

    @staticmethod
    def _explain(
        head: ChannelHead,
        refusal: IntegrityError,
        expected_version: int | None,
        expected_cursor: int,
    ) -> NoReturn:
        """Turn the store's refusal into the ConflictError that explains it."""
        try:
            head.ensure_at(expected_version=expected_version, expected_cursor=expected_cursor)
        except ConflictError as conflict:
            raise conflict from None
        raise refusal

    def _save(
        self,
        objects: Sequence[Aggregate | DomainEvent],
        operation_id: str | None,
        command: str,
        content: str,
        result: dict[str, Any],
        at: datetime,
    ) -> Operation | None:
        """Save aggregates and events with the operation record; on a lost race, the winner's.

        Re-raises the store's ``IntegrityError`` when no operation record explains it.
        """
        pending = list(objects)
        if operation_id is not None:
            pending.append(
                Operation.executed(
                    operation_id=operation_id,
                    command=command,
                    fingerprint=content,
                    result=result,
                    at=at,
                )
            )
        try:
            self.save(*pending)
        except IntegrityError:
            winner = self._recorded(operation_id, content)
            if winner is None:
                raise
            return winner
        return None

    def _recorded(self, operation_id: str | None, content: str) -> Operation | None:
        """The earlier execution of this operation, refused if its content differs."""
        original = self.reader.operation(operation_id)
        if original is not None:
            original.ensure_same(content)
        return original

    def _replayed_receipt(self, channel_id: UUID, original: Operation) -> Receipt:
        return Receipt(
            channel_id=channel_id,
            cursor=original.recorded_result["cursor"],
            state_version=original.recorded_result["state_version"],
            operation_id=original.operation_id,
            replayed=True,
        )

    def _document(self, field: str, value: object) -> Document:
        return require_document(field, value, self.codec, max_bytes=self.max_document_bytes)

    def _canonical_text(self, value: object) -> str:
        return self.codec.canonical(value).decode()
