"""JSON encoding with orjson: canonical bytes, a transcoder, a pydantic mapper, body checksums.

Values must be plain JSON. orjson would quietly turn datetimes, dataclasses and subclasses of
built-in types into something else, which would break the round trip (and the checksum), so
they are refused here instead.

**Every stored body carries a checksum**, verified each time the body is read: a flipped
byte in a recorded step result must not be served as the result, and neither SQLite's nor
PostgreSQL's own checks see a byte changed inside a well-formed row (nor does AES-GCM, which
authenticates only the sealed contents). It is SHA-256 over every byte of the body as the
encoder wrote it and the row's identity (topic, aggregate id, version), truncated to 128
bits, so a body copied to another row is refused too. It detects corruption, not a
deliberate rewrite. It is the body's last member, ``"$checksum":"<32 hex>/<10 digits>"``,
so the body stays one JSON document for SQL and operators, and is found by position,
without parsing. A body without one is refused: every body Actae writes has it
(``tests/property/test_body_checksums.py`` flips every byte; docs/architecture.md, "Stored
bodies carry a checksum").

The digits after the slash say how many bytes before the member the checksum hashed first.
A transition's body ends with its state, written as the canonical bytes the validation made
(whose SHA-256 is the state checksum): the body checksum continues a copy of that SHA-256
over the rest of the body, so the state, the largest part of a write, is hashed once on the
write path; the reader hashes the same bytes in the same order, once, as for any body. Any
other body has ``0`` there: it is hashed in order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import cache
from typing import Any, cast
from uuid import UUID

import orjson
from eventsourcing.domain import DomainEventProtocol
from eventsourcing.persistence import Mapper, StoredEvent, Transcoder
from pydantic import BaseModel

from actae.adapters.persistence.encoders import IDENTITY, Encoder, encoder_for, holds_models
from actae.adapters.persistence.operation_ids import StoredRecord
from actae.domain.aggregate import DomainEvent
from actae.domain.channel import Channel
from actae.domain.errors import CorruptionError
from actae.domain.operation import Operation
from actae.domain.retention import Retention
from actae.domain.run import Run
from actae.domain.type_names import class_named
from actae.domain.validation import Document
from actae.projections.heads import ChannelEventHead

STRICT = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
CANONICAL = STRICT | orjson.OPT_SORT_KEYS
NARROW_INTEGERS = CANONICAL | orjson.OPT_STRICT_INTEGER
"""Refuses integers beyond 53 bits: the same bytes otherwise, so a success proves there is
no wide integer inside (and a failure sends us to the plain encoding)."""


class OrjsonCodec:
    """Canonical JSON (sorted keys, compact) for checksums and operation fingerprints."""

    def canonical(self, value: Any) -> bytes:
        """Encode ``value``; raise ``TypeError`` naming what is not plain JSON."""
        try:
            return orjson.dumps(value, option=CANONICAL)
        except orjson.JSONEncodeError as error:
            raise TypeError(str(error)) from None

    def canonical_with_hint(self, value: Any) -> tuple[bytes, bool]:
        """Canonical bytes, and whether an integer beyond 53 bits may be inside."""
        try:
            return orjson.dumps(value, option=NARROW_INTEGERS), False
        except orjson.JSONEncodeError:
            pass  # a wide integer, or something the plain encoding refuses too
        return self.canonical(value), True


class OrjsonTranscoder(Transcoder):
    """Transcodes event state to JSON bytes with orjson (UUIDs and datetimes as strings)."""

    def encode(self, obj: Any) -> bytes:
        """Encode an event's field dict."""
        return orjson.dumps(obj)

    def decode(self, data: bytes) -> Any:
        """Decode an event's field dict."""
        return orjson.loads(data)


STORED_AGGREGATES = (Channel, Operation, Retention, Run)
"""The aggregates whose events a store holds. Imported here, so that every type name they
declare (:mod:`actae.domain.type_names`) is known before the first row is read."""


def is_flat(cls: type[BaseModel]) -> bool:
    """Whether ``cls``'s fields are plain values, so its ``__dict__`` is its ``model_dump``.

    Most events (every channel event, every command's operation record) are flat; reading
    their fields directly instead of through ``model_dump`` saves a few microseconds each
    time a field dict is needed. Events with nested models (pins, retry policies) still go
    through ``model_dump``.
    """
    return not any(holds_models(field.annotation) for field in cls.model_fields.values())


@cache
def event_class(topic: str) -> type[DomainEvent]:
    """The Actae event class a stored topic names; anything else is refused.

    A stored topic is an event's type name, looked up among the names Actae's classes
    declare: nothing is ever imported for it. An aggregate's name is no event's. Each topic
    is looked up once (a refusal raises, so it is never remembered): a catch-up decodes
    tens of thousands of events a second, of a few dozen topics.
    """
    cls = class_named(topic)
    if not (isinstance(cls, type) and issubclass(cls, DomainEvent)):
        raise CorruptionError("stored event", f"topic {topic[:80]!r} is not an Actae event")
    return cls


@cache
def layout(cls: type[DomainEvent]) -> tuple[str, bool, Encoder]:
    """An event class's topic, flatness and encoder, found once per class."""
    return cls.type_name, is_flat(cls), encoder_for(cls)


class PydanticMapper(Mapper[Any]):
    """Maps pydantic domain events to stored events and back.

    Bodies are written by each class's encoder (:mod:`actae.adapters.persistence.encoders`),
    the bytes ``OrjsonTranscoder`` would make of :meth:`fields_of`, without the dict, and read
    with orjson as it decodes: the transcoder it is given must be that one. Each body is stored
    with its checksum and verified before it is decoded
    (:func:`stamped`, :func:`verified`).
    """

    in_clear = True
    """Whether every content this mapper writes goes unsealed: the insert then refuses a
    run that has a data key (:mod:`actae.adapters.persistence.forgets`)."""
    offload_above: int | None = None
    """The body size above which contents may move out of the row (``None``: they never do)."""

    def to_stored_event(
        self, domain_event: DomainEventProtocol[Any], state: Document | None = None
    ) -> StoredEvent:
        """Serialise a pydantic event; its topic is its class's type name.

        ``state``: the validated document the event's ``state`` holds, if the caller has it
        (a transition): written and checksummed as it is, not encoded and hashed again. An
        event with contents goes to :meth:`in_custody` only when they may be sealed or moved
        out (:mod:`actae.adapters.custody.sealing`); a clear store's small events do not.
        """
        cls: type[DomainEvent] = type(domain_event)  # type: ignore[assignment]  # an Actae event
        topic, _, encode = layout(cls)
        body = encode(domain_event, state)
        limit = self.offload_above
        if (not self.in_clear or (limit is not None and len(body) > limit)) and cls.contents:
            return self.in_custody(domain_event, topic, body, state)
        return stored_event_of(domain_event, topic, body, state)

    def in_custody(
        self, domain_event: Any, topic: str, body: bytes, state: Document | None
    ) -> StoredEvent:
        """The row of an event whose contents may be sealed or moved out of it.

        This mapper seals and moves nothing: the body is written as it is.
        """
        return stored_event_of(domain_event, topic, body, state)

    def fields_of(self, domain_event: DomainEventProtocol[Any]) -> tuple[str, dict[str, Any]]:
        """The event's topic, and the fields its stored body holds (a fresh dict).

        The reference for the encoders, and what sealing takes contents out of.
        """
        event = cast(BaseModel, domain_event)
        topic, flat, _ = layout(type(event))
        if flat:
            state = event.__dict__.copy()
            for name in IDENTITY:
                del state[name]
        else:
            state = event.model_dump(exclude=set(IDENTITY))
        return topic, state

    def to_domain_event(self, stored_event: StoredEvent) -> DomainEventProtocol[Any]:
        """Rebuild a pydantic event from its verified body."""
        state = self.body_of(stored_event)
        return self.decoded(event_class(stored_event.topic), stored_event, state)

    def to_read_event(
        self, stored_event: StoredEvent
    ) -> DomainEventProtocol[Any] | ChannelEventHead:
        """One event as the read models take it (:meth:`read_events`); refused, it raises."""
        (event,) = self.read_events([stored_event])
        if isinstance(event, Exception):
            raise event
        return cast(DomainEventProtocol[Any] | ChannelEventHead, event)

    def read_events(self, stored_events: Sequence[StoredEvent]) -> list[Any]:
        """Each event as the read models take it, in order, or the exception that refused it.

        A channel event is read as its head (:class:`~actae.projections.heads.ChannelEventHead`),
        all the read models read of it: validating it alone spares the payload and the state.
        Only where the whole event would carry its contents as they are: :meth:`reads_heads`
        (asked once for the batch) allows it, and the verified body holds nothing but its
        class's fields (a sealed or offloaded body has a member of its own, and decodes
        whole; so does a body with a member no field takes, which the whole event refuses).
        One loop for the batch, the loop-invariant found before it: a catch-up reads tens of
        thousands of events a second, and every call per event counts.
        """
        heads = self.reads_heads()
        head = ChannelEventHead.__pydantic_validator__.validate_python
        read: list[Any] = []
        for stored in stored_events:
            try:
                state = self.body_of(stored)
                cls, fields = read_layout(stored.topic)
                if heads and fields is not None and state.keys() <= fields:
                    state["originator_id"] = stored.originator_id
                    state["originator_version"] = stored.originator_version
                    try:
                        read.append(head(state))
                    except ValueError as error:  # pydantic's ValidationError
                        raise CorruptionError(
                            where(stored), f"its body does not fit a channel event's head: {error}"
                        ) from error
                else:
                    read.append(self.decoded(cls, stored, state))
            except Exception as error:
                read.append(error)
        return read

    def reads_heads(self) -> bool:
        """Whether a channel event whose body has only its class's fields may be read as its head.

        This mapper seals and moves nothing: it may.
        """
        return True

    def decoded(
        self, cls: type[DomainEvent], stored_event: StoredEvent, state: dict[str, Any]
    ) -> DomainEventProtocol[Any]:
        """The event of class ``cls`` from its verified, decoded body ``state`` (consumed)."""
        return self.rebuilt(cls, stored_event, state)

    def body_of(self, stored_event: StoredEvent) -> dict[str, Any]:
        """The stored body's fields, once its checksum (which covers the topic) matches.

        Every read decodes through here, so nothing of a body is used before it is verified.
        """
        body = verified(stored_event)
        try:
            state = orjson.loads(body)  # OrjsonTranscoder.decode, without its call
        except ValueError as error:  # orjson's JSONDecodeError
            raise CorruptionError(where(stored_event), f"its body is not JSON ({error})") from None
        if not isinstance(state, dict):
            raise CorruptionError(where(stored_event), "its body is not a JSON object")
        return state

    def rebuilt(
        self, cls: type[DomainEvent], stored_event: StoredEvent, state: dict[str, Any]
    ) -> DomainEventProtocol[Any]:
        """The event of class ``cls`` from its decoded body ``state`` (consumed).

        A body its class refuses (a member no event has, a value of the wrong type) is
        corruption: this is also what refuses a body whose checksum member was damaged.
        """
        try:
            state["originator_id"] = stored_event.originator_id
            state["originator_version"] = stored_event.originator_version
            return cast(DomainEventProtocol[Any], cls.model_validate(state))
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            raise CorruptionError(
                where(stored_event), f"its body does not fit {cls.__qualname__}: {error}"
            ) from error


@cache
def read_layout(topic: str) -> tuple[type[DomainEvent], frozenset[str] | None]:
    """The class a topic names and, for a channel event, the members its body may hold."""
    cls = event_class(topic)
    return cls, body_fields(cls) if issubclass(cls, Channel.Event) else None


@cache
def body_fields(cls: type[DomainEvent]) -> frozenset[str]:
    """The members a stored body of ``cls`` may hold: its fields less the row's identity."""
    return frozenset(cls.model_fields) - IDENTITY


def stored_event_of(
    event: DomainEventProtocol[Any], topic: str, body: bytes, state: Document | None = None
) -> StoredEvent:
    """The row for ``event``: its identity, topic, ``body`` with its checksum, operation id.

    ``state``: the document ``body`` ends with, if its encoder wrote it as it is
    (:func:`stamped`). The operation id is there if the event records an operation
    (:mod:`~actae.adapters.persistence.operation_ids`).
    """
    originator_id = event.originator_id
    version = event.originator_version
    stamped_body = stamped(topic, originator_id, version, body, state)
    key = event.stored_operation_id  # type: ignore[attr-defined]  # an Actae event's
    if key is not None:
        return StoredRecord(originator_id, version, topic, stamped_body, key)
    return StoredEvent(originator_id, version, topic, stamped_body)


# -- body checksums ----------------------------------------------------------------------

CHECKSUM = "$checksum"
"""The body member that holds the checksum (the last one)."""
OPENING = b',"' + CHECKSUM.encode() + b'":"'
DIGITS = 32
"""Hex digits kept of the SHA-256 (128 bits)."""
SEPARATOR = b"/"
WIDTH = 10
"""Decimal digits of the length the checksum hashed first: more than any value a backend
stores holds (PostgreSQL and SQLite stop at a gigabyte)."""
CLOSING = b'"}'
TAIL = len(OPENING) + DIGITS + len(SEPARATOR) + WIDTH + len(CLOSING)
"""Bytes the checksum member adds at the end of the body."""
RECORDED = slice(len(OPENING), len(OPENING) + DIGITS)
SEPARATED = slice(RECORDED.stop, RECORDED.stop + len(SEPARATOR))
LENGTH = slice(SEPARATED.stop, SEPARATED.stop + WIDTH)
"""Where the checksum member (the body's last ``TAIL`` bytes) holds the digits and length."""
IN_ORDER = b"0" * WIDTH
"""The length of a body hashed in order (nothing hashed first): every body but a state's."""
NOUNS = {
    "Channel": ("channel", "cursor"),
    "Run": ("run", "version"),
    "Operation": ("operation", "version"),
}
"""How an error names the aggregate whose name starts a topic, and the place in it."""


def stamped(
    topic: str,
    originator_id: UUID | str,
    version: int,
    body: bytes,
    state: Document | None = None,
) -> bytes:
    """``body`` (a JSON object with at least one member) with its checksum as last member.

    Given the validated ``state`` that ``body``'s last member holds as its canonical bytes
    (a transition's), the checksum starts from a copy of the state's own SHA-256, which
    has hashed those bytes already, and goes on over the rest (:func:`row_of`).
    """
    view = memoryview(body)[:-1]
    first = 0
    if state is not None and body.startswith(state.canonical, len(view) - len(state.canonical)):
        first = len(state.canonical)
        digest = state.sha256.copy()
        digest.update(view[:-first])
    else:
        digest = hashlib.sha256(view)
    length = b"%0*d" % (WIDTH, first) if first else IN_ORDER
    digest.update(row_of(topic, originator_id, version, length))
    hexdigits = digest.hexdigest()[:DIGITS].encode()
    return b"".join((view, OPENING, hexdigits, SEPARATOR, length, CLOSING))


def verified(stored: StoredEvent) -> bytes:
    """The body as its encoder wrote it, once its checksum matches (else ``CorruptionError``)."""
    state = stored.state
    end = len(state) - TAIL
    member = state[end:]
    length = member[LENGTH]
    if not (
        member.startswith(OPENING)
        and member[SEPARATED] == SEPARATOR
        and (length == IN_ORDER or length.isdigit())
        and member.endswith(CLOSING)
    ):
        raise CorruptionError(
            where(stored),
            "its body has no checksum member where every stored body has one: the row "
            "changed below Actae after it was written; restore it from a backup",
        )
    body = state[:end]  # sliced, not viewed: a memoryview costs more than copying a body
    if length == IN_ORDER:
        digest = hashlib.sha256(body)
    else:  # if the length is damaged, the bytes split elsewhere, and the checksum differs
        first = int(length)
        digest = hashlib.sha256(body[end - first :])
        digest.update(body[: end - first])
    digest.update(row_of(stored.topic, stored.originator_id, stored.originator_version, length))
    actual = digest.hexdigest()[:DIGITS].encode()
    recorded = member[RECORDED]
    if actual != recorded:
        raise CorruptionError(
            where(stored),
            f"its checksum {recorded.decode(errors='replace')} does not match its body "
            f"(computed {actual.decode()}): the row changed below Actae after it was "
            "written; restore it from a backup",
        )
    return body + b"}"


def row_of(topic: str, originator_id: UUID | str, version: int, length: bytes) -> bytes:
    """What the checksum hashes last: the row's identity and the member's length digits.

    The checksum hashes the body's last ``length`` bytes before the member first, then the
    body before them, then this: the body is split where the digits say, and the digits
    themselves are hashed, so a damaged length splits it elsewhere and fails the checksum.
    """
    originator = (  # the bytes UUID.bytes gives, without its property call
        originator_id.int.to_bytes(16, "big")
        if isinstance(originator_id, UUID)
        else originator_id.encode()
    )
    return b"|%b|%b|%d|%b" % (topic.encode(), originator, version, length)


def where(stored: StoredEvent) -> str:
    """The stored event named as a user finds it: its channel and cursor, or aggregate."""
    noun, place = NOUNS.get(stored.topic.partition(".")[0], ("aggregate", "version"))
    return f"stored event of {noun} {stored.originator_id} at {place} {stored.originator_version}"
