"""Stored rows name their classes by stable type names, never by where the classes live.

``NAMES`` is the checked-in list of every name a store may hold. A name in it must never
change once a release has written it: stores keep their rows. Adding an event adds a name
here; renaming or moving a class changes nothing here.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar
from uuid import uuid4

import pytest

from actae.adapters.persistence.codec import (
    STORED_AGGREGATES,
    OrjsonTranscoder,
    PydanticMapper,
    event_class,
    layout,
)
from actae.domain.aggregate import Aggregate, DomainEvent
from actae.domain.channel import Channel
from actae.domain.type_names import class_named, declared_names

NAMES = {
    "Channel": ("Opened", "Recorded", "Transitioned"),
    "Operation": (
        "Executed",
        "Registered",
        "Claimed",
        "Renewed",
        "Doubted",
        "Completed",
        "Failed",
        "Reconciled",
        "Abandoned",
    ),
    "Retention": ("Defined", "Changed"),
    "Run": (
        "Started",
        "Forked",
        "ChildStarted",
        "Suspended",
        "Decided",
        "Escalated",
        "Paused",
        "Unpaused",
        "Cancelled",
        "Completed",
        "Failed",
        "Retried",
        "Forgotten",
        "Held",
        "Released",
        "Purged",
        "Migrated",
    ),
}
MAPPER = PydanticMapper(transcoder=OrjsonTranscoder())


def checked_in() -> set[str]:
    return {
        *NAMES,
        *(f"{aggregate}.{event}" for aggregate, events in NAMES.items() for event in events),
    }


def test_the_declared_names_are_the_checked_in_ones() -> None:
    assert {aggregate.type_name for aggregate in STORED_AGGREGATES} == set(NAMES)
    assert set(declared_names()) == checked_in()


def test_a_name_says_nothing_of_the_module_that_defines_its_class() -> None:
    for name, cls in declared_names().items():
        assert ":" not in name
        assert not any(part in name.lower() for part in cls.__module__.split(".")[:2])


def test_each_event_is_stored_and_found_by_its_name() -> None:
    for name, cls in declared_names().items():
        if not issubclass(cls, DomainEvent):
            continue
        assert layout(cls)[0] == name
        assert event_class(name) is cls


def test_a_class_moved_to_another_module_keeps_its_stored_name() -> None:
    cls = Channel.Recorded
    where = cls.__module__, cls.__qualname__
    event = cls(
        originator_id=uuid4(),
        originator_version=2,
        timestamp=datetime.now(UTC),
        run_id=uuid4(),
        kind="step.result",
        payload={"value": 1},
        operation_id=None,
        state_version=1,
        state_cursor=1,
    )
    try:
        cls.__module__, cls.__qualname__ = "actae.somewhere.else", "Renamed"
        layout.cache_clear()
        event_class.cache_clear()

        stored = MAPPER.to_stored_event(event)

        assert stored.topic == "Channel.Recorded"
        assert MAPPER.to_domain_event(stored) == event
    finally:
        cls.__module__, cls.__qualname__ = where
        layout.cache_clear()


def spec(**body: Any) -> type[Aggregate]:
    """A class statement for an aggregate called ``Spec``, with ``body`` in it."""
    return type("Spec", (Aggregate,), {"__module__": __name__, "__qualname__": "Spec", **body})


def test_an_aggregate_without_a_name_fails_at_its_definition() -> None:
    with pytest.raises(TypeError, match="must declare its stable type name"):
        spec()


def test_an_event_without_a_name_fails_and_registers_nothing() -> None:
    class Noted(Aggregate.Event):
        """Something was noted."""

    with pytest.raises(TypeError, match=r"Spec\.Noted.* must declare .*'Spec\.Noted'"):
        spec(type_name="Spec", Noted=Noted)

    assert class_named("Spec") is None


def test_a_name_another_class_declared_fails() -> None:
    class Started(Aggregate.Event):
        """Something began."""

        type_name: ClassVar[str] = "Run.Started"

    with pytest.raises(TypeError, match="must declare"):  # another aggregate's name
        spec(type_name="Spec", Started=Started)
    with pytest.raises(TypeError, match="declares the type name 'Run' of"):
        spec(type_name="Run")


def test_two_events_of_one_name_fail() -> None:
    class Noted(Aggregate.Event):
        """Something was noted."""

        type_name: ClassVar[str] = "Spec.Noted"

    class Seen(Noted):
        """Something was seen (and forgot to name itself)."""

    with pytest.raises(TypeError, match=r"declares the type name 'Spec\.Noted' of"):
        spec(type_name="Spec", Noted=Noted, Seen=Seen)
    assert class_named("Spec") is None
