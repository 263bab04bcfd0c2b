"""Pydantic events on eventsourcing aggregates; the only glue between the two.

Our events are frozen pydantic models, so nested values (pins, fork records) rebuild themselves from
JSON without hand-written transcodings.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from datetime import datetime
from typing import Any, ClassVar, Self, cast
from uuid import UUID

from eventsourcing.domain import (
    BaseAggregate,
    CanInitAggregate,
    CanMutateAggregate,
    OriginatorVersionError,
)
from eventsourcing.utils import register_topic, resolve_topic
from pydantic import BaseModel, ConfigDict, field_validator

from actae.domain import type_names


class Value(BaseModel):
    """An immutable value that refuses fields it does not declare (events, waits, policies)."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class DomainEvent(Value):
    """An immutable fact about one aggregate, at one version, at one time."""

    type_name: ClassVar[str]
    """The stable name its rows carry as topic (``Run.Started``); never changed once stored."""
    contents: ClassVar[tuple[str, ...]] = ()
    """The fields holding what the agent produced (dotted into nested values): sealed when the
    store encrypts, withheld once forgotten. The rest is metadata, in clear."""
    content_owner: ClassVar[str] = "run_id"
    """The field naming the run whose data key seals ``contents``."""
    withheld: ClassVar[str | None] = None
    """Why ``contents`` cannot be read (``forgotten``, ``locked``) on a
    :func:`~actae.domain.custody.withheld_class`."""

    originator_id: UUID
    originator_version: int
    timestamp: datetime

    def __init_subclass__(cls, type_name: str | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if type_name is not None:  # declared in the class line: class Paused(Acted, type_name=...)
            cls.type_name = type_name

    @property
    def stored_operation_id(self) -> str | None:
        """The operation id its row carries, uniquely indexed across the store (or ``None``)."""
        return None


class Aggregate(BaseAggregate[UUID]):
    """Base of Actae's aggregates: ids are given by the caller, events are pydantic models."""

    type_name: ClassVar[str]
    """The aggregate's stable name, which its first event stores as ``originator_topic``."""

    def __init_subclass__(cls, type_name: str | None = None, **kwargs: Any) -> None:
        """Register the aggregate and its events by type name; ``__init__`` takes no parameters."""
        super().__init_subclass__(**kwargs)
        if type_name is not None:
            cls.type_name = type_name
        if list(inspect.signature(cls.__init__).parameters) != ["self"]:
            msg = f"{cls.__qualname__}.__init__ must take no parameters: apply() sets state"
            raise TypeError(msg)
        events = [
            (name, value)
            for name, value in vars(cls).items()
            if isinstance(value, type) and issubclass(value, DomainEvent)
        ]
        register_topic(type_names.declare(cls, events), cls)

    class Event(DomainEvent, CanMutateAggregate[UUID]):
        """Base of every event an Actae aggregate emits."""

    class Created(Event, CanInitAggregate[UUID]):
        """First event of an aggregate; names the aggregate class by its type name."""

        originator_topic: str

        @field_validator("originator_topic")
        @classmethod
        def _names_its_aggregate(cls, topic: str) -> str:
            """Refuse any other name: eventsourcing would import a module path it was given."""
            if topic != cls.type_name.partition(".")[0]:
                msg = f"{topic[:80]!r} is not the type name of this event's aggregate"
                raise ValueError(msg)
            return topic

        def mutate(self, aggregate: Any) -> Any:
            """The new aggregate, as ``CanInitAggregate.mutate`` makes it (no signature checks)."""
            if aggregate is not None:  # a first event can only come first
                raise OriginatorVersionError(self.originator_version, aggregate.version + 1)
            cls = resolve_topic(self.originator_topic)
            made = cls.__new__(cls)
            made.__base_init__(
                originator_id=self.originator_id,
                originator_version=self.originator_version,
                timestamp=self.timestamp,
            )
            made.__init__()
            self.apply(made)
            return made

    @classmethod
    def created(cls, event_class: type[Created], **fields: Any) -> Self:
        """The new aggregate (pending) its first event makes, naming it by type name."""
        event = event_class(originator_version=1, originator_topic=cls.type_name, **fields)
        aggregate = cast(Self, event.mutate(None))
        aggregate.pending_events.append(event)
        return aggregate

    @staticmethod
    def create_id(*_: Any, **__: Any) -> UUID:
        """Refuse to invent ids: commands pass ids in, so event bodies stay deterministic."""
        msg = "Actae aggregates are created with an explicit id"
        raise NotImplementedError(msg)


class Acted(Aggregate.Event):
    """An event someone caused on purpose: who, and why, kept for the audit trail."""

    actor: str
    reason: str


def picked(source: object, names: str) -> dict[str, Any]:
    """The values of ``source``'s attributes ``names`` (space-separated), by name."""
    return {name: getattr(source, name) for name in names.split()}


def folded(events: Iterable[DomainEvent]) -> object:
    """The aggregate its ``events`` make, applied in order; ``None`` for no events."""
    aggregate: Any = None
    for event in events:
        aggregate = event.mutate(aggregate)  # type: ignore[attr-defined]
    return aggregate
