"""Pydantic events on eventsourcing aggregates.

The eventsourcing library's own event classes are frozen dataclasses; ours are frozen pydantic
models so that nested value objects (pins, fork records) rebuild themselves from JSON without
hand-written transcodings. This module is the only glue between the two.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, ClassVar
from uuid import UUID

from eventsourcing.domain import BaseAggregate, CanInitAggregate, CanMutateAggregate
from pydantic import BaseModel, ConfigDict


class DomainEvent(BaseModel):
    """An immutable fact about one aggregate, at one version, at one time."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    contents: ClassVar[tuple[str, ...]] = ()
    """The fields that hold what the agent produced (documents, results, errors): sealed
    under the owning run's data key when the store encrypts, withheld once it is forgotten.
    A dotted name reaches into a nested value (``decision.payload``). Everything else is
    metadata and stays in clear: ids, kinds, cursors, versions, times, status, pins, usage."""
    content_owner: ClassVar[str] = "run_id"
    """The field naming the run whose data key seals ``contents``."""
    withheld: ClassVar[str | None] = None
    """Why this event's ``contents`` could not be read (``forgotten``, ``locked``), set on
    the stand-in class :func:`actae.domain.custody.withheld_class` makes; ``None`` here."""

    originator_id: UUID
    originator_version: int
    timestamp: datetime

    @property
    def stored_operation_id(self) -> str | None:
        """The operation id this event's row carries, unique across the store (or ``None``).

        The row that records an operation (an Operation's first event, the channel event of
        a record or transition given an ``operation_id``) carries its id in a column of its
        own with a unique index: a second execution of the id is refused by the store in
        the transaction that would write it, whichever kind of command it is.
        """
        return None


class Aggregate(BaseAggregate[UUID]):
    """Base of Actae's aggregates: ids are given by the caller, events are pydantic models."""

    class Event(DomainEvent, CanMutateAggregate[UUID]):
        """Base of every event an Actae aggregate emits."""

    class Created(Event, CanInitAggregate[UUID]):
        """First event of an aggregate; names the aggregate class by topic."""

        originator_topic: str

    @staticmethod
    def create_id(*_: Any, **__: Any) -> UUID:
        """Refuse to invent ids: commands pass ids in, so event bodies stay deterministic."""
        msg = "Actae aggregates are created with an explicit id"
        raise NotImplementedError(msg)


def folded(events: Iterable[DomainEvent]) -> object:
    """The aggregate its ``events`` make, applied in order; ``None`` for no events."""
    aggregate: Any = None
    for event in events:
        aggregate = event.mutate(aggregate)  # type: ignore[attr-defined]
    return aggregate
