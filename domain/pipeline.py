"""The one loop every command runs through, and the port its functions do IO through.

A command validates, loads, decides (pure) and saves its events with its operation record; a lost
race (a primary key refused the write) is decided again on what the winner wrote, or answered from
the winner's record of the same operation (other content: ``OperationConflictError``).
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
"""Lost races a command decides again before ``ContentionError``: each one was another writer's
progress."""


@dataclass
class Core:
    """What commands use besides their arguments; none of it does IO."""

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
        """``value`` as a document cleaned by ``first`` then the store's redactor; the counts."""
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
    """The store's port as commands see it (``ActaeService`` implements it)."""

    core: Core
    reader: StoreReader

    def now(self) -> datetime:
        """The store's clock (on PostgreSQL the database's)."""
        ...

    def save(self, *objs: Aggregate | DomainEvent) -> list[int]:
        """Write the pending events of ``objs`` together; :class:`RaceLost` if refused."""
        ...


class RaceLost(Exception):  # noqa: N818 - an expected outcome of a save, not an error
    """Raised by :meth:`Shell.save`: a primary key refused the write; nothing was written."""


@dataclass(frozen=True, slots=True)
class Once(Generic[T]):
    """The operation record that makes a command run once (``look_first``: look before trying)."""

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
        """The record of a command that creates something, under a made-up id if given none."""
        # Made up front, so a retry after a lost reply finds the record.
        record_id = operation_id or f"{command}:{uuid4()}"
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


def retried(
    shell: Shell,
    attempt: Callable[[int], T],
    what: Callable[[], str],
    *,
    once: Once[T] | None = None,
    exhausted: Callable[[], NoReturn] | None = None,
) -> T:
    """Run ``attempt(n)`` until one saves without losing a race; its answer.

    With ``once``, an earlier execution answers by ``once.replay``. After :data:`RACE_ATTEMPTS`
    losses, ``exhausted`` raises, or ``ContentionError`` names ``what()``.
    """
    look = once is not None and once.look_first
    for number in range(RACE_ATTEMPTS):
        if look and once is not None:
            original = shell.reader.operation(once.operation_id)
            if original is not None:  # refused if its content differs
                original.ensure_same(once.content)
                return once.replay(original)
        try:
            return attempt(number)
        except RaceLost:
            look = True
    if exhausted is not None:
        exhausted()
    raise ContentionError(what(), RACE_ATTEMPTS)


def pending_events(objects: Iterable[object]) -> list[DomainEvent]:
    """The events to write for ``objects`` (aggregates or events; anything else is refused)."""
    events: list[DomainEvent] = []
    for obj in objects:
        if isinstance(obj, DomainEvent):
            events.append(obj)
        elif isinstance(obj, Aggregate):
            events.extend(obj.collect_events())  # type: ignore[arg-type]
        else:
            raise TypeError(f"cannot save a {type(obj).__name__}: not an Actae aggregate")
    return events
