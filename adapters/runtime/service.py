"""The shell: the store as the domain's commands see it (:class:`Shell`).

``record`` and ``transition``, the hot path, are pure appends
(``Append``, :mod:`actae.domain.channel`): :meth:`ActaeService.append` brings the head, the time and
the write, and holds their race loop. Every other command is a plain function of the domain
(``domain/lifecycle.py``, ``ledger.py``, ``keeping.py``, ``starting.py``, ``forking.py``)
that takes this service as its :class:`Shell`: it reads through :attr:`reader`, asks
:meth:`now`, and writes with :meth:`save`, whose refusal on a primary key or an operation id
(``IntegrityError``) is :class:`RaceLost`, on which the pipeline decides again. This is all
the IO there is on the command path.
"""

from __future__ import annotations

import functools
import logging
import random
import threading
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, Concatenate, ParamSpec, TypeVar, cast
from uuid import UUID

from eventsourcing.persistence import IntegrityError

from actae.adapters.persistence.codec import PydanticMapper
from actae.adapters.persistence.recorders import EventStore
from actae.adapters.readside.subscription import Commits
from actae.domain.aggregate import DomainEvent
from actae.domain.channel import Append, Channel, ChannelHead
from actae.domain.errors import ContentionError, HistoryRegressedError
from actae.domain.operation import Operation
from actae.domain.pipeline import RACE_ATTEMPTS, Core, RaceLost, Shell, pending_events
from actae.domain.ports import Clock, Codec
from actae.domain.reader import StoreReader, receipt_of
from actae.domain.redaction import Redactor
from actae.domain.regression import WatchedLog
from actae.domain.validation import DEFAULT_MAX_DOCUMENT_BYTES, Document
from actae.domain.values import Receipt

log = logging.getLogger("actae.store")
P = ParamSpec("P")
T = TypeVar("T")


class ActaeService:
    """Runs commands against one event store (:mod:`actae.adapters.persistence.recorders`)."""

    def __init__(
        self,
        events: EventStore,
        *,
        codec: Codec,
        clock: Clock,
        max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES,
        draw: Callable[[], float] = random.random,
        redact: Redactor | None = None,
    ) -> None:
        self.mapper = cast(PydanticMapper, events.mapper)  # actae's mappers all are
        self.metadata_mapper = events.metadata_mapper
        self.recorder = events.recorder
        self.event_log = events.log
        self.close = events.close
        self.codec = codec
        self.clock = clock
        self.max_document_bytes = max_document_bytes
        self.written = Commits()
        self.core = Core(
            codec=codec, max_document_bytes=max_document_bytes, draw=draw, redact=redact
        )
        self.reader = StoreReader(WatchedLog(self.event_log, self.core.seen), codec, clock)
        self.commit_listeners: list[Callable[[Sequence[DomainEvent]], None]] = []
        self._regression_logged = threading.Lock()
        self._regression_said = False

    def now(self) -> datetime:
        """The store's clock (on PostgreSQL the database's, unless ``actae.open`` got one)."""
        return self.clock()

    def call(
        self, command: Callable[Concatenate[Shell, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """``command(self, *args, **kwargs)``: a domain command run on this store.

        A regression of the store's history that the command meets stops this process, and
        is logged the first time (:meth:`ensure_not_regressed`).
        """
        try:
            return command(self, *args, **kwargs)
        except HistoryRegressedError as error:
            self._stopped_by(error)
            raise

    def append(self, append: Append) -> Receipt:
        """Write ``append``'s event on the head the caller expected; its receipt.

        The head is this process's guess when it fits (no read: the hot path), else the
        store's. A lost race (the store took the cursor or the operation id first) looks the
        operation record up, since the winner may be this very call whose reply was lost,
        and otherwise decides again on the head as stored.
        """
        try:
            looked = False
            for _ in range(RACE_ATTEMPTS):
                head = self.core.heads.get(append.channel_id)
                if head is None or not append.fits(head):
                    found = self._head_for(append, head, look=not looked)
                    if isinstance(found, Receipt):
                        return found
                    head = found
                event = append.event_after(head, at=self.clock())
                try:
                    self._write([event], state=append.state)
                except RaceLost:
                    looked = True
                    original = self._earlier(append)
                    if original is not None:
                        return append.replayed(original)
                    continue
                return receipt_of(event)
        except HistoryRegressedError as error:
            self._stopped_by(error)
            raise
        raise ContentionError(f"channel {append.channel_id}", RACE_ATTEMPTS)

    def _head_for(
        self, append: Append, guess: ChannelHead | None, *, look: bool
    ) -> ChannelHead | Receipt:
        """The head if it is the one ``append`` expects, or the replay of an earlier run.

        Called when this process's ``guess`` is missing or not the expected head. A mismatch
        is checked against the operation record first (unless a lost race has looked
        already), because a retried command carries stale expected values by construction,
        and then against the head as stored.
        """
        head = guess or self._stored_head(append.channel_id)
        if append.fits(head):
            return head
        original = self._earlier(append) if look else None
        if original is not None:
            return append.replayed(original)
        if guess is not None:
            head = self._stored_head(append.channel_id)
        append.ensure_fits(head)
        return head

    def _stored_head(self, channel_id: UUID) -> ChannelHead:
        """The channel's head as stored (one read), remembered as the new guess."""
        event = self.reader.head_event(channel_id)
        self.core.heads.put(event)
        return ChannelHead.of(event)

    def _earlier(self, append: Append) -> Operation | None:
        """The recorded execution under ``append``'s operation id, if there is one."""
        if append.operation_id is None:
            return None
        return self.reader.operation(append.operation_id)

    def ensure_not_regressed(self) -> None:
        """Refuse to write once this process found the store behind what it saw.

        Everything the process remembers may then describe history the store lost, and a
        write would build a new history over it: the process stops taking work on this
        store (docs/outages.md, "Failovers that lose commits"). A fresh process starts
        from what the store holds.
        """
        regressed = self.core.seen.regressed
        if regressed is not None:
            raise HistoryRegressedError(
                regressed.channel,
                seen=regressed.seen,
                found=regressed.found,
                what=regressed.measure,
            ) from regressed

    def _stopped_by(self, error: HistoryRegressedError) -> None:
        """Log the regression at ERROR, once: the first time it stops this process."""
        with self._regression_logged:
            if self._regression_said:
                return
            self._regression_said = True
        log.error("%s", error, extra={"channel": str(error.channel)})

    def forget_guesses(self, ids: Iterable[UUID]) -> None:
        """Drop this process's guesses (heads, effects held) about the aggregates ``ids``."""
        for id_ in ids:
            self.core.heads.forget(id_)
            self.core.effects.forget(id_)

    def save(self, *objs: Any, **kwargs: Any) -> Any:
        """Write the pending events of aggregates (and bare events) together; their positions.

        Then remembers the new channel heads and the effects held, tells the commit listeners
        (``Store.on_commit``) and wakes this process's subscribers, who re-read the store. A
        refusal on a primary key is :class:`RaceLost`, and the heads of the channels
        and the effects involved are forgotten: the next attempt must read them as stored
        (so are they after any other failure, whose outcome is unknown).

        The events go to the mapper and the recorder directly: there is no aggregate cache
        beyond those guesses, no snapshotting and no process application to keep up to date.
        """
        return self._write(pending_events(objs), **kwargs)

    def _write(self, events: list[Any], state: Document | None = None, **kwargs: Any) -> Any:
        """:meth:`save` of ``events`` (eventsourcing types them as protocols).

        ``state``: the validated state of the one event a transition writes, whose bytes
        and SHA-256 the row reuses (:meth:`PydanticMapper.to_stored_event`).
        """
        self.ensure_not_regressed()
        try:
            if state is None:
                rows = [self.mapper.to_stored_event(event) for event in events]
            else:
                (event,) = events
                rows = [self.mapper.to_stored_event(event, state)]
            # The insert refuses a forgotten owner's contents, and a keyed one's in clear.
            owners, in_clear = content_owners(events), self.mapper.in_clear
            positions = self.recorder.insert_events(
                rows, owners=owners, in_clear=in_clear, **kwargs
            )
        except BaseException as error:  # a lost race, or an outcome unknown: guesses go
            self.forget_guesses(event.originator_id for event in events)
            if isinstance(error, IntegrityError):
                raise RaceLost from None
            raise
        self.core.seen.saw(events)
        others = []  # a channel's events start or end no memory of an effect
        for event in events:
            if isinstance(event, Channel.Event):
                self.core.heads.put(event)
            else:
                others.append(event)
        if others:
            self.core.effects.written(others)
        for listener in self.commit_listeners:
            listener(events)
        self.written.committed()
        return positions


def content_owners(events: Sequence[DomainEvent]) -> list[UUID]:
    """The runs whose contents ``events`` hold (each class names its ``content_owner``)."""
    found = [
        owner
        for event in events
        if isinstance(owner := getattr(event, owner_field(type(event)), None), UUID)
    ]
    return found if len(found) < 2 else sorted(set(found))


@functools.cache
def owner_field(cls: type[DomainEvent]) -> str:
    """The field naming the run whose contents events of ``cls`` hold, once per class.

    ``""`` for a class without contents: no attribute's name, so ``getattr`` gives its default.
    """
    return cls.content_owner if cls.contents else ""
