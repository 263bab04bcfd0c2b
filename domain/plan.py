"""What a command asks of the outside world: its plan is a generator of requests.

A command's decide function never does IO. It *yields* requests, and whoever runs it sends
back the answers:

- :class:`Read`: a question for the store's reader (a run, a channel head, an operation);
- :data:`NOW`: the store's clock (on PostgreSQL it reads the database's clock);
- :class:`Save`: write these events together, or nothing. A save that loses a race (another
  writer took one of the aggregate versions first) is answered by throwing
  :class:`RaceLost` into the plan at the ``yield``.

Everything between the requests is pure: validation, the aggregates' decisions, fingerprints,
the retry loop (:mod:`actae.domain.pipeline`). So one decide function serves a synchronous
shell, which answers each request with a blocking call, and an asynchronous one, which awaits
it; neither shell holds a rule of its own. The helpers below keep the requests typed:
``run = yield from ask(StoreReader.run_aggregate, run_id)`` is a :class:`Run` to mypy.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Concatenate, Final, ParamSpec, TypeVar

from actae.domain.aggregate import Aggregate, DomainEvent

if TYPE_CHECKING:
    from actae.domain.reader import StoreReader

T = TypeVar("T")
P = ParamSpec("P")


@dataclass(frozen=True, slots=True)
class Read:
    """Ask the reader: the answer is ``query(reader, *args, **kwargs)``."""

    query: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Now:
    """Ask the store's clock for the current time (aware, UTC)."""


@dataclass(frozen=True, slots=True)
class Save:
    """Write ``events`` in one transaction; the answer is their global positions."""

    events: tuple[DomainEvent, ...]


Request = Read | Now | Save
Plan = Generator[Request, Any, T]
"""A command (or part of one) as the requests it makes; its return value is the answer."""

NOW: Final = Now()


class RaceLost(Exception):  # noqa: N818 - an expected outcome of a save, not an error
    """Thrown into a plan at its :class:`Save`: another writer took a version first.

    The shell raises it when the store refuses the write on its primary key (an aggregate
    version, a channel cursor or an operation id already taken); nothing was written. The
    pipeline (:func:`actae.domain.pipeline.retried`) catches it and decides again.
    """


def ask(
    query: Callable[Concatenate[StoreReader, P], T], *args: P.args, **kwargs: P.kwargs
) -> Plan[T]:
    """The reader's answer to ``query(reader, *args, **kwargs)``."""
    answer: T = yield Read(query, args, kwargs)
    return answer


def now() -> Plan[datetime]:
    """The store's current time."""
    answer: datetime = yield NOW
    return answer


def save(*objects: Aggregate | DomainEvent) -> Plan[list[int]]:
    """Write the pending events of ``objects`` together; their global positions."""
    positions: list[int] = yield Save(tuple(pending_events(objects)))
    return positions


def answered(value: T) -> Plan[T]:
    """A plan that asks nothing and answers ``value``."""
    return value
    yield  # pragma: no cover - makes this a generator


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
