"""The one pipeline every command runs through, and the port its functions do IO through.

A command is a plain function whose signature is the public one (``Store`` binds it): its
first argument is the :class:`Shell`, the store as the domain sees it (its reader, its
clock, its one write). It goes: validate (before anything is read) → look up its operation
record → load → decide (the aggregates; pure) → save the events together with the
operation record → on a lost race, re-read and decide again. :func:`retried` is that loop,
written once for every command; each command supplies one *attempt* (load, decide, save)
and, for a command with an ``operation_id``, what a recorded earlier execution answers
(:class:`Once`).

A lost race is the normal way concurrent writers meet: the store's primary keys (aggregate
version, channel cursor, operation id) let exactly one of them write, and the loser decides
again on what the winner wrote. A loser whose operation id the winner recorded with the
same content *is* the winner (a retry of one logical call, or a lost reply): it answers
what the record says. Different content under that id is an ``OperationConflictError``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, NoReturn, Protocol, TypeVar
from uuid import uuid4

from actae.domain.aggregate import Aggregate, DomainEvent
from actae.domain.channel import HeadCache
from actae.domain.errors import ContentionError
from actae.domain.known_effects import KnownEffects
from actae.domain.operation import Operation
from actae.domain.ports import Codec
from actae.domain.reader import StoreReader
from actae.domain.redaction import Redactor, in_turn
from actae.domain.regression import SeenHistory
from actae.domain.validation import DEFAULT_MAX_DOCUMENT_BYTES, Document, require_document

T = TypeVar("T")

RACE_ATTEMPTS = 50
"""Lost races a command re-decides before it gives up with ``ContentionError``.

Each loss means another writer made progress on the same aggregate, so fifty in a row
happen only under a pile-up that retrying at once would not clear either.
"""


@dataclass
class Core:
    """What commands use besides their arguments; none of it does IO.

    ``heads`` are this process's guesses of channel heads (:class:`~.channel.HeadCache`),
    ``effects`` of the effects it holds (:mod:`actae.domain.known_effects`),
    ``seen`` how far it saw each aggregate's history go (:mod:`actae.domain.regression`),
    ``draw`` the source of retry jitter (a test pins it to make backoffs exact).
    """

    codec: Codec
    max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES
    heads: HeadCache = field(default_factory=HeadCache)
    effects: KnownEffects = field(default_factory=KnownEffects)
    seen: SeenHistory = field(default_factory=SeenHistory)
    """The history this process saw (:mod:`actae.domain.regression`): a floor, not a guess."""
    draw: Callable[[], float] = random.random
    redact: Redactor | None = None
    """The store's redactor (``actae.open(redact=)``): run on every record and effect result."""

    def document(self, name: str, value: object) -> Document:
        """``value`` checked as a JSON document within the size limit, with its checksum."""
        return require_document(name, value, self.codec, max_bytes=self.max_document_bytes)

    def redacted(
        self, name: str, value: object, first: Redactor | None
    ) -> tuple[Document, dict[str, int]]:
        """``value`` with secrets removed (by ``first``, then the store's), as a document.

        Also the counts by pattern name that the event records. The input is checked as a
        document first, so a redactor only ever sees plain JSON.
        """
        document = self.document(name, value)
        redactors = [r for r in (first, self.redact) if r is not None]
        if not redactors:
            return document, {}
        cleaned = in_turn(redactors, document.value, where="chain")
        if not cleaned.counts and cleaned.value == document.value:
            return document, {}
        return self.document(name, cleaned.value), cleaned.counts

    def canonical_text(self, value: object) -> str:
        """``value`` as canonical JSON text (the basis of fingerprints)."""
        return self.codec.canonical(value).decode()


class Shell(Protocol):
    """What a command may do besides deciding: the store's port, as the domain sees it.

    ``ActaeService`` (``adapters/runtime/service.py``) is the one implementation; the
    asyncio face runs the same calls through a portal, so no command is written twice.
    """

    core: Core
    reader: StoreReader

    def now(self) -> datetime:
        """The store's clock (on PostgreSQL the database's)."""
        ...

    def save(self, *objs: Aggregate | DomainEvent) -> list[int]:
        """Write the pending events of ``objs`` together; :class:`RaceLost` if refused."""
        ...


class RaceLost(Exception):  # noqa: N818 - an expected outcome of a save, not an error
    """Raised by :meth:`Shell.save`: another writer took a version first.

    The store refused the write on its primary key (an aggregate version, a channel cursor
    or an operation id already taken); nothing was written. :func:`retried` catches it and
    decides again.
    """


@dataclass(frozen=True, slots=True)
class Once(Generic[T]):
    """The operation record that makes a command run once under its ``operation_id``.

    ``look_first``: look the record up before the first attempt. A command that reads
    nothing on its normal path (record, transition) looks only when something is refused,
    and an id made up by this call (:func:`generated_operation_id`) cannot be recorded yet.
    """

    operation_id: str
    command: str
    content: str
    replay: Callable[[Operation], T]
    look_first: bool

    @classmethod
    def per_call(
        cls,
        operation_id: str | None,
        command: str,
        content: str,
        replay: Callable[[Operation], T],
    ) -> Once[T]:
        """The record of a command that creates something (a run, a fork) under any id.

        Given no ``operation_id``, the call records itself under one made up for it, so
        that an attempt whose commit went unseen (a lost reply) is found and replayed
        instead of creating a second run; a made-up id cannot be recorded yet, so only a
        given one is looked up first.
        """
        record_id = operation_id or generated_operation_id(command)
        return cls(record_id, command, content, replay, look_first=operation_id is not None)

    def executed(self, result: dict[str, Any], at: datetime) -> Operation.Executed:
        """The record to save with the command's events: it ran, and answered ``result``."""
        return Operation.executed(
            operation_id=self.operation_id,
            command=self.command,
            fingerprint=self.content,
            result=result,
            at=at,
        )

    def earlier(self, reader: StoreReader) -> Operation | None:
        """The recorded execution of this operation, refused if its content differs."""
        original = reader.operation(self.operation_id)
        if original is not None:
            original.ensure_same(self.content)
        return original


def retried(
    shell: Shell,
    attempt: Callable[[int], T],
    what: Callable[[], str],
    *,
    once: Once[T] | None = None,
    exhausted: Callable[[], NoReturn] | None = None,
) -> T:
    """Run ``attempt(n)`` until one saves without losing a race; its answer.

    With ``once``, the operation record is looked up first (if ``once.look_first``) and
    after every lost race: an earlier execution answers by ``once.replay``. After
    :data:`RACE_ATTEMPTS` losses, ``exhausted`` raises the command's own explanation, or
    ``ContentionError`` names ``what()`` (formatted only then: it is off the hot path).
    """
    look = once is not None and once.look_first
    for number in range(RACE_ATTEMPTS):
        if look and once is not None:
            original = once.earlier(shell.reader)
            if original is not None:
                return once.replay(original)
        try:
            return attempt(number)
        except RaceLost:
            look = True
    if exhausted is not None:
        exhausted()
    raise ContentionError(what(), RACE_ATTEMPTS)


def generated_operation_id(command: str) -> str:
    """An operation id made up for one call of ``command`` that was given none.

    The call saves its operation record under it, so when the store's answer to a write is
    lost and the call tries again, it finds its own earlier write instead of repeating it.
    """
    return f"{command}:{uuid4()}"


def pending_events(objects: Iterable[object]) -> list[DomainEvent]:
    """The events to write for ``objects``: each aggregate's pending events, or the event.

    Anything else is refused: only Actae's own aggregates and events are ever stored.
    """
    events: list[DomainEvent] = []
    for obj in objects:
        if isinstance(obj, DomainEvent):
            events.append(obj)
        elif isinstance(obj, Aggregate):
            events.extend(obj.collect_events())  # type: ignore[arg-type]
        else:
            raise TypeError(f"cannot save a {type(obj).__name__}: not an Actae aggregate")
    return events
