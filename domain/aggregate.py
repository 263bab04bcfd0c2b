"""Pydantic events on eventsourcing aggregates; the only glue between the two.

Our events are frozen pydantic models, so nested values (pins, fork records) rebuild themselves from
JSON without hand-written transcodings.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from datetime import datetime
from functools import cache
from operator import itemgetter
from typing import Any, ClassVar, NamedTuple, Self, TypeVar, cast
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


E = TypeVar("E", bound=DomainEvent)


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


def constructed(cls: type[E], values: dict[str, Any]) -> E:
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
