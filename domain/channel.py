"""The Channel aggregate: a run's ordered, gapless event log with pinned state versions.

A channel's cursor *is* its aggregate version, so the event store's primary key
``(originator_id, originator_version)`` enforces both gaplessness and ``expected_cursor``.
Every event carries the state version in force after it and the cursor where that version was
created, which makes each event a complete description of the channel head: loading a head
is one indexed read, never a replay of history.

The channel's two commands live here too, beside the events they make: ``record`` and
``transition`` validate the caller's arguments and return an :class:`Append`, which the shell
writes on the head (below, "appending").
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from functools import cache, partial
from operator import attrgetter, itemgetter
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, Protocol, TypeVar
from uuid import UUID

from pydantic import Field

from actae.domain.aggregate import Aggregate, DomainEvent
from actae.domain.errors import ConflictError
from actae.domain.validation import (
    Document,
    fingerprint,
    optional_text,
    require_amounts,
    require_document,
    require_int,
    require_json,
    require_text,
    require_uuid,
)
from actae.domain.values import Receipt

if TYPE_CHECKING:  # the codec and a redactor are only named here
    from actae.domain.ports import Codec
    from actae.domain.redaction import Redactor


class Channel(Aggregate, type_name="Channel"):
    """An ordered, gapless event log owned by a run; state versions are pinned to cursors."""

    if TYPE_CHECKING:  # set by events' apply(); not dataclass fields
        run_id: UUID
        state_version: int
        state_cursor: int
        open_effects: tuple[str, ...]
        usage: dict[str, float]

    class Event(Aggregate.Event):
        """Something happened on a channel; fields after it describe the head completely.

        ``open_effects`` lists the ledger effects of the run that are not settled yet
        (claimed, in doubt, retrying, needing review), so recovery finds them from the head.
        """

        contents: ClassVar[tuple[str, ...]] = ("payload",)

        run_id: UUID
        kind: str
        payload: dict[str, Any]
        operation_id: str | None
        state_version: int
        state_cursor: int
        open_effects: tuple[str, ...] = ()
        usage: dict[str, float] = Field(default_factory=dict)
        fingerprint: str | None = None
        """The content fingerprint of the record or transition that wrote this event under
        ``operation_id``: the event is then that command's operation record (its row
        carries the id, unique in the store). ``None`` for any other event, and for events
        written before the store kept records in the event's row."""

        @property
        def stored_operation_id(self) -> str | None:
            """``operation_id`` if this event is its command's record (it has a fingerprint)."""
            return self.operation_id if self.fingerprint is not None else None

        def apply(self, aggregate: Any) -> None:
            """Make the channel's head match this event."""
            _take_head(aggregate, self)

    class Opened(Event, Aggregate.Created, type_name="Channel.Opened"):
        """The channel was opened at cursor 1 with its first state version."""

        contents: ClassVar[tuple[str, ...]] = ("payload", "state")

        state_checksum: str
        state: dict[str, Any]
        """Last: the stored body ends with it, so its checksum can start from the state's
        own SHA-256 (:mod:`actae.adapters.persistence.codec`)."""

    class Recorded(Event, type_name="Channel.Recorded"):
        """A result was recorded on the channel; the state version did not change.

        ``redacted`` counts, by pattern name, the secrets the store's redaction removed
        from ``payload`` before it was written (never the secrets themselves).
        """

        redacted: dict[str, int] = Field(default_factory=dict)

    class Transitioned(Event, type_name="Channel.Transitioned"):
        """A new state version was created and pinned to this event's cursor."""

        contents: ClassVar[tuple[str, ...]] = ("payload", "state")

        state_checksum: str
        state: dict[str, Any]
        """Last, as in :class:`Opened`."""

    @classmethod
    def open(
        cls,
        *,
        channel_id: UUID,
        run_id: UUID,
        kind: str,
        payload: dict[str, Any],
        state: dict[str, Any],
        state_checksum: str,
        operation_id: str | None,
        at: datetime,
    ) -> Channel:
        """Open a channel whose first event creates state version 1 at cursor 1."""
        return cls.created(
            cls.Opened,
            originator_id=channel_id,
            timestamp=at,
            run_id=run_id,
            kind=kind,
            payload=payload,
            operation_id=operation_id,
            state=state,
            state_checksum=state_checksum,
            state_version=1,
            state_cursor=1,
        )

    @classmethod
    def from_head(cls, head: Channel.Event | ChannelHead) -> Channel:
        """Rebuild the channel from its last event alone (each event describes the head)."""
        channel = cls.__new__(cls)
        channel.__base_init__(head.originator_id, head.originator_version, head.timestamp)
        _take_head(channel, head)
        return channel

    @property
    def cursor(self) -> int:
        """Cursor of the last event on the channel."""
        return self.version

    def ensure_at(self, *, expected_version: int | None, expected_cursor: int) -> None:
        """Refuse to write unless the caller saw exactly this head (``ChannelHead.ensure_at``)."""
        self.head().ensure_at(expected_version=expected_version, expected_cursor=expected_cursor)

    def head(self) -> ChannelHead:
        """The channel's head, as its last event describes it."""
        return ChannelHead(self.id, self.version, self.modified_on, *carried_values(self))

    # -- events on top of a head, without an aggregate ------------------------------------
    #
    # A command that appends one event to a channel needs only the head, not an aggregate
    # rebuilt around it: these build the same event ``trigger_event`` would (property tests
    # hold them equal) for records, transitions and, through ``following``, the ledger's
    # notes of effects (``actae.domain.ledger.effect_note``).

    @classmethod
    def following(cls, head: ChannelHead, event_class: type[E], at: datetime, **fields: Any) -> E:
        """The next event after ``head``; the head fields it does not change carry forward.

        Built without pydantic's validation, which would only repeat the command's own (the
        hot path's largest cost after the statement): every value is the head's, already an
        event's, or one the command validated. The documents are copied at the top, as
        validation copies them, so the caller's later changes do not reach the event.
        """
        return next_event(head, event_class, at, fields)

    @classmethod
    def transitioned(
        cls,
        head: ChannelHead,
        *,
        kind: str,
        payload: dict[str, Any],
        state: dict[str, Any],
        state_checksum: str,
        operation_id: str | None,
        at: datetime,
        fingerprint: str | None = None,
    ) -> Channel.Transitioned:
        """The event creating the next state version after ``head``, pinned to its cursor.

        With a ``fingerprint``, the event is the transition's operation record.
        """
        fields = transition_fields(head, kind, payload, state, state_checksum, operation_id)
        if fingerprint is not None:
            fields["fingerprint"] = fingerprint
        return next_event(head, cls.Transitioned, at, fields)

    @classmethod
    def recorded(
        cls,
        head: ChannelHead,
        *,
        kind: str,
        payload: dict[str, Any],
        operation_id: str | None,
        at: datetime,
        usage: dict[str, float] | None = None,
        redacted: dict[str, int] | None = None,
        fingerprint: str | None = None,
    ) -> Channel.Recorded:
        """The event recording a result after ``head``; see :meth:`record`.

        With a ``fingerprint``, the event is the record's operation record.
        """
        fields = record_fields(head, kind, payload, operation_id, usage)
        if redacted:
            fields["redacted"] = redacted
        if fingerprint is not None:
            fields["fingerprint"] = fingerprint
        return next_event(head, cls.Recorded, at, fields)

    def record(
        self,
        *,
        kind: str,
        payload: dict[str, Any],
        operation_id: str | None,
        at: datetime,
        usage: dict[str, float] | None = None,
    ) -> None:
        """Append a recorded result; the state version stays; ``usage`` adds to the totals."""
        self._append(
            self.Recorded, at, **record_fields(self.head(), kind, payload, operation_id, usage)
        )

    def transition(
        self,
        *,
        kind: str,
        payload: dict[str, Any],
        state: dict[str, Any],
        state_checksum: str,
        operation_id: str | None,
        at: datetime,
    ) -> None:
        """Append an event that creates the next state version, pinned to its own cursor."""
        fields = transition_fields(self.head(), kind, payload, state, state_checksum, operation_id)
        self._append(self.Transitioned, at, **fields)

    def _append(self, event_class: type[Channel.Event], at: datetime, **fields: Any) -> None:
        """Trigger the next event; the head fields it does not change carry forward."""
        self.trigger_event(event_class, timestamp=at, **{**carried(self), **fields})


E = TypeVar("E", bound=Channel.Event)
"""A class of channel event, which the event built on a head is of."""


class ChannelHead(NamedTuple):
    """The fields of a channel event that describe the head, without the event's body.

    What :class:`HeadCache` remembers: enough for ``Channel.from_head``,
    small whatever the size of the state the event carried.
    """

    originator_id: UUID
    originator_version: int
    timestamp: datetime
    run_id: UUID
    state_version: int
    state_cursor: int
    open_effects: tuple[str, ...]
    usage: dict[str, float]

    def ensure_at(self, *, expected_version: int | None, expected_cursor: int) -> None:
        """Refuse to write unless the caller saw exactly this head.

        ``expected_version`` is the *state* version (``None``: not checked, as for a
        record) and ``expected_cursor`` the *log* position, the cursor of the last event.
        """
        if not self.is_at(expected_version, expected_cursor):
            raise ConflictError(
                self.originator_id,
                expected_version=expected_version,
                actual_version=self.state_version,
                expected_cursor=expected_cursor,
                actual_cursor=self.originator_version,
            )

    def is_at(self, expected_version: int | None, expected_cursor: int) -> bool:
        """Whether this is the head the caller saw (see :meth:`ensure_at`)."""
        version_moved = expected_version is not None and expected_version != self.state_version
        return not version_moved and expected_cursor == self.originator_version

    @classmethod
    def of(cls, event: Channel.Event) -> ChannelHead:
        """The head described by ``event``."""
        return cls(
            event.originator_id, event.originator_version, event.timestamp, *carried_values(event)
        )


CARRIED = ("run_id", "state_version", "state_cursor", "open_effects", "usage")
"""The head fields every channel event carries, in ``ChannelHead``'s order (the one list)."""

carried_values = attrgetter(*CARRIED)
"""``CARRIED``'s values of an event, head or channel, as a tuple (read on every write)."""


def _take_head(channel: Any, head: Channel.Event | ChannelHead) -> None:
    """Set the head fields every channel event carries."""
    for name in CARRIED:
        setattr(channel, name, getattr(head, name))


DOCUMENTS = ("payload", "state")
"""The fields of a channel event that hold a caller's document."""


def next_event(head: ChannelHead, event_class: type[E], at: datetime, fields: dict[str, Any]) -> E:
    """:meth:`Channel.following` with its ``fields`` as one dict (not copied: the hot path)."""
    values = dict(zip(CARRIED, carried_values(head), strict=True), **fields)
    values["originator_id"] = head.originator_id
    values["originator_version"] = head.originator_version + 1
    values["timestamp"] = at
    for name in DOCUMENTS:
        if name in values:
            values[name] = dict(values[name])
    return constructed(event_class, values)


def carried(head: Channel | ChannelHead) -> dict[str, Any]:
    """The head fields an event carries forward unless it changes them."""
    return dict(zip(CARRIED, carried_values(head), strict=True))


def transition_fields(
    head: ChannelHead,
    kind: str,
    payload: dict[str, Any],
    state: dict[str, Any],
    state_checksum: str,
    operation_id: str | None,
) -> dict[str, Any]:
    """What a transition after ``head`` says: the next state version, created at its cursor."""
    return {
        "kind": kind,
        "payload": payload,
        "operation_id": operation_id,
        "state": state,
        "state_checksum": state_checksum,
        "state_version": head.state_version + 1,
        "state_cursor": head.originator_version + 1,
    }


def record_fields(
    head: ChannelHead,
    kind: str,
    payload: dict[str, Any],
    operation_id: str | None,
    usage: dict[str, float] | None,
) -> dict[str, Any]:
    """What a recorded result after ``head`` says: ``usage`` added to the run's totals."""
    totals = dict(head.usage)
    for name, amount in (usage or {}).items():
        totals[name] = totals.get(name, 0.0) + amount
    return {"kind": kind, "payload": payload, "operation_id": operation_id, "usage": totals}


# -- appending: ``record`` (a result) and ``transition`` (a new state version) ----------
#
# Each command is a pure function of the caller's arguments: it validates all of them
# (nothing read, nothing written on failure) and returns an :class:`Append`, which decides
# over a channel head: whether the head is the one the caller expected (``expected_version``,
# the state version, and ``expected_cursor``, the log position) and which event follows it.
# The shell (``adapters/runtime/service.py``, ``ActaeService.append``) brings the head (this
# process's guess, ``HeadCache``, or the store's), the time, and the write.
#
# Given an ``operation_id``, the event is the command's operation record too: it carries the
# command's content fingerprint, and its row the id, which the store keeps unique (one row
# per write, where a separate record row cost a tenth of the write: docs/performance.md).
# Anything refused on the way is explained from durable records before it is reported: a
# failed check or a lost race looks up the ``operation_id`` first, so a repeat with the same
# content returns the original receipt (``replayed=True``; a retry after a crash carries
# stale expected values by construction) and different content is an
# ``OperationConflictError``; only then is it a ``ConflictError`` against the head as stored.
# A command that succeeds has therefore read nothing: the store's unique index on the
# operation id refuses a second execution inside the statement that would have written it.


class Append(NamedTuple):
    """One checked append to a channel: what the caller expected, and the event it makes.

    ``expected_version`` is ``None`` for a record, which creates no state version and so
    guards only the log position. ``content`` is the command's fingerprint, what a repeat
    under ``operation_id`` must match to be answered as the original. A tuple, as
    :class:`ChannelHead` is: one is made on every write.
    """

    channel_id: UUID
    operation_id: str | None
    content: str
    expected_version: int | None
    expected_cursor: int
    event_after: Callable[..., Channel.Event]
    """``event_after(head, at=...)``: the event that follows ``head``, written ``at`` (pure)."""
    state: Document | None = None
    """A transition's validated state, which the event holds: its canonical bytes and their
    SHA-256 are written into the stored body as they are, not encoded and hashed again."""

    def fits(self, head: ChannelHead) -> bool:
        """Whether ``head`` is the one the caller expected."""
        return head.is_at(self.expected_version, self.expected_cursor)

    def ensure_fits(self, head: ChannelHead) -> None:
        """``ConflictError`` against ``head`` unless it is the one the caller expected."""
        head.ensure_at(expected_version=self.expected_version, expected_cursor=self.expected_cursor)

    def replayed(self, original: Recorded) -> Receipt:
        """The receipt of the recorded execution ``original``, if its content is this one's.

        Different content under the same ``operation_id`` is an ``OperationConflictError``.
        """
        original.ensure_same(self.content)
        return Receipt(
            channel_id=self.channel_id,
            cursor=original.recorded_result["cursor"],
            state_version=original.recorded_result["state_version"],
            operation_id=original.operation_id,
            replayed=True,
        )


class Recorded(Protocol):
    """What :meth:`Append.replayed` needs of an operation record (``domain/operation.py``).

    A protocol, not an import: ``operation`` builds its events with :func:`constructed`.
    """

    operation_id: str

    @property
    def recorded_result(self) -> dict[str, Any]:
        """The result the original command returned."""
        ...

    def ensure_same(self, fingerprint: str) -> None:
        """Refuse a repeat whose content differs from the original's."""
        ...


class Core(Protocol):
    """What ``record`` and ``transition`` need of the pipeline's ``Core``.

    A protocol, not an import: the pipeline imports this module.
    """

    codec: Codec
    max_document_bytes: int

    def redacted(
        self, name: str, value: object, first: Redactor | None
    ) -> tuple[Document, dict[str, int]]:
        """``value`` as a document cleaned by ``first`` then the store's redactor; the counts."""
        ...


def record(
    core: Core,
    channel_id: UUID | str,
    *,
    kind: str,
    payload: dict[str, Any],
    expected_cursor: int,
    operation_id: str | None = None,
    usage: Mapping[str, float] | None = None,
    redact: Redactor | None = None,
) -> Append:
    """Record a result (a model call, a tool output) right after ``expected_cursor``.

    ``expected_cursor`` is the channel's log position the caller last saw (the state
    version is not checked: a record creates none). ``usage`` (e.g. ``{"tokens": 812,
    "cost": 0.02}``) adds to the run's running totals, which budgets are checked against.
    ``redact`` removes secrets from ``payload`` before the store's own redactor does; the
    event counts what left it (docs/data.md).
    """
    cid = require_uuid("channel_id", channel_id)
    kind = require_text("kind", kind)
    body, redacted = core.redacted("payload", payload, redact)
    spent = require_amounts("usage", usage)
    expected_cursor = require_int("expected_cursor", expected_cursor, minimum=1)
    operation_id = optional_text("operation_id", operation_id)
    usage_part = (str(sorted(spent.items())),) if spent else ()
    content = fingerprint("record", str(cid), kind, body.checksum, *usage_part)
    event_after = partial(
        Channel.recorded,
        kind=kind,
        payload=body.value,
        operation_id=operation_id,
        usage=spent,
        redacted=redacted,
        fingerprint=None if operation_id is None else content,
    )
    return Append(cid, operation_id, content, None, expected_cursor, event_after)


def transition(
    core: Core,
    channel_id: UUID | str,
    *,
    kind: str,
    payload: dict[str, Any],
    state: dict[str, Any],
    expected_version: int,
    expected_cursor: int,
    operation_id: str | None = None,
) -> Append:
    """Commit an event and the next state version together, or nothing at all.

    ``expected_version`` is the *state* version the caller last saw and
    ``expected_cursor`` the channel's *log* position: both must still be the head's;
    otherwise nothing is written and ``ConflictError`` reports what is stored.
    """
    cid = require_uuid("channel_id", channel_id)
    kind = require_text("kind", kind)
    limit = core.max_document_bytes
    payload, body = require_json("payload", payload, core.codec, max_bytes=limit)
    document = require_document("state", state, core.codec, max_bytes=limit)
    expected_version = require_int("expected_version", expected_version, minimum=1)
    expected_cursor = require_int("expected_cursor", expected_cursor, minimum=1)
    operation_id = optional_text("operation_id", operation_id)
    # One hash: the payload's canonical JSON holds no raw control character, so the parts
    # still read back one way (the state checksum has a fixed form, the kind is what is left).
    content = fingerprint("transition", str(cid), kind, body.decode(), document.checksum)
    event_after = partial(
        Channel.transitioned,
        kind=kind,
        payload=payload,
        state=document.value,
        state_checksum=document.checksum,
        operation_id=operation_id,
        fingerprint=None if operation_id is None else content,
    )
    return Append(
        cid, operation_id, content, expected_version, expected_cursor, event_after, document
    )


# -- this process's guess of each channel's head --------------------------------------
#
# Remembering the last head this process wrote or read saves a read before each write. It
# is never trusted for correctness: a write on a stale head asks for a cursor already taken,
# the store's primary key refuses it, and the command re-reads the head before it answers.

DEFAULT_MAX_CHANNELS = 10_000


class HeadCache:
    """The newest head event seen per channel; forgets the oldest-entered past ``maxsize``.

    It also remembers each run's main channel: that never changes, so the answer is always
    right and proves that the run exists.
    """

    def __init__(self, maxsize: int = DEFAULT_MAX_CHANNELS) -> None:
        self._maxsize = maxsize
        self._heads: dict[UUID, ChannelHead] = {}
        self._channels: dict[UUID, UUID] = {}
        self._lock = threading.Lock()

    def get(self, channel_id: UUID) -> ChannelHead | None:
        """The remembered head of ``channel_id``, if any (it may be stale)."""
        return self._heads.get(channel_id)

    def forget(self, channel_id: UUID) -> None:
        """Drop the guess for ``channel_id``: a write on it lost a race, so it is stale."""
        with self._lock:
            self._heads.pop(channel_id, None)

    def main_channel(self, run_id: UUID) -> UUID | None:
        """The main channel of ``run_id``, if an event of it was seen."""
        return self._channels.get(run_id)

    def put(self, event: Channel.Event) -> None:
        """Remember ``event``'s head fields unless a later event of its channel is known.

        Only the head is kept (:class:`ChannelHead`), not the payload or a transition's
        state: 10,000 remembered states of a megabyte each would hold gigabytes.
        """
        head = ChannelHead.of(event)
        with self._lock:
            if event.run_id not in self._channels:
                if len(self._channels) >= self._maxsize:
                    del self._channels[next(iter(self._channels))]
                self._channels[event.run_id] = event.originator_id
            known = self._heads.get(event.originator_id)
            if known is not None and known.originator_version >= event.originator_version:
                return
            if known is None and len(self._heads) >= self._maxsize:
                del self._heads[next(iter(self._heads))]
            self._heads[event.originator_id] = head

    def __len__(self) -> int:
        return len(self._heads)


D = TypeVar("D", bound=DomainEvent)
"""Any event class: :func:`constructed` also builds the ledger's."""


class Layout(NamedTuple):
    """An event class's fields as :func:`constructed` reads them, found once per class."""

    fields: tuple[tuple[str, Any], ...]
    """Name and pydantic field, in definition order (the stored body's order)."""
    order: tuple[str, ...]
    """The names alone, in that order."""
    names: frozenset[str]
    in_order: itemgetter[Any]
    """``in_order(values)``: the values of every field, in definition order (in C)."""


@cache
def layout_of(cls: type[DomainEvent]) -> Layout:
    """``cls``'s :class:`Layout`, once."""
    order = tuple(cls.model_fields)
    return Layout(tuple(cls.model_fields.items()), order, frozenset(order), itemgetter(*order))


def constructed(cls: type[D], values: dict[str, Any]) -> D:
    """An event of ``cls`` from validated ``values``, as ``model_construct`` makes one (hot paths).

    ``__dict__`` holds the fields in definition order, as validation leaves it: encoders copy it.
    """
    fields, order, names, in_order = layout_of(cls)
    if not values.keys() <= names:  # not validated: a misspelling would go unseen
        unknown = sorted(values.keys() - names)
        raise TypeError(f"{cls.__qualname__} has no field {', '.join(unknown)}")
    if len(values) == len(fields):  # each field given: put in order (in C)
        state = dict(zip(order, in_order(values), strict=True))
    else:
        state = _with_defaults(fields, values)
    event = cls.__new__(cls)
    object.__setattr__(event, "__dict__", state)
    object.__setattr__(event, "__pydantic_fields_set__", set(values))
    object.__setattr__(event, "__pydantic_extra__", None)
    object.__setattr__(event, "__pydantic_private__", None)
    return event


def _with_defaults(fields: tuple[tuple[str, Any], ...], values: dict[str, Any]) -> dict[str, Any]:
    """``values`` in the fields' order, a field not given at its default."""
    return {
        name: values[name] if name in values else field.get_default(call_default_factory=True)
        for name, field in fields
    }
