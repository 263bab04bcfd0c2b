"""Property: a channel event's head projects exactly as the whole event does.

The projector decodes a channel event's head alone where its mapper allows it
(``PydanticMapper.to_read_event``): the read models must not tell the difference. Events are
drawn from their classes' annotations (``tests/property/test_encoders.py``), written by a
clear store's mappers, and read back both ways.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from eventsourcing.persistence import StoredEvent
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from actae.adapters.persistence.codec import PydanticMapper, stamped
from actae.domain.aggregate import DomainEvent
from actae.domain.channel import Channel
from actae.domain.errors import CorruptionError
from actae.projections.changes import Change
from actae.projections.heads import ChannelEventHead
from actae.projections.project import project
from tests.property.test_encoders import CLASSES, CLEAR_STORE, MAPPER, events

CHANNEL_EVENTS = [cls for cls in CLASSES if issubclass(cls, Channel.Event)]


def projected(read: Callable[[StoredEvent], Any], stored: StoredEvent) -> list[Change] | str:
    """The changes of ``stored`` read by ``read``, or that its body was refused."""
    try:
        return project(read(stored))
    except CorruptionError:
        return "refused"


def test_the_head_validates_its_fields_as_a_channel_event_does() -> None:
    assert {cls.__qualname__ for cls in CHANNEL_EVENTS} == {
        "Channel.Opened",
        "Channel.Recorded",
        "Channel.Transitioned",
    }
    for name, field in ChannelEventHead.model_fields.items():
        event_field = Channel.Event.model_fields[name]
        assert field.annotation == event_field.annotation, name
        assert field.metadata == event_field.metadata, name
        assert field.get_default(call_default_factory=True) == event_field.get_default(
            call_default_factory=True
        ), name


@pytest.mark.parametrize("mapper", [MAPPER, CLEAR_STORE], ids=["plain", "clear store"])
@pytest.mark.parametrize("cls", CHANNEL_EVENTS, ids=lambda cls: cls.__qualname__)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_channel_events_head_projects_as_the_whole_event(
    mapper: PydanticMapper, cls: type[DomainEvent], data: st.DataObject
) -> None:
    event = data.draw(events(cls))
    stored = mapper.to_stored_event(event)

    read = projected(mapper.to_read_event, stored)

    assert read == projected(mapper.to_domain_event, stored)
    if read != "refused":  # as both are of a value JSON cannot hold (infinity is null)
        assert isinstance(mapper.to_read_event(stored), ChannelEventHead)
        assert read == project(event)


@pytest.mark.parametrize(
    "cls", [c for c in CLASSES if c not in CHANNEL_EVENTS], ids=lambda cls: cls.__qualname__
)
@settings(
    max_examples=3,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(data=st.data())
def test_any_other_event_is_read_whole(cls: type[DomainEvent], data: st.DataObject) -> None:
    event = data.draw(events(cls))
    assume(json_can_hold(event.model_dump()))  # as every validated write does

    assert CLEAR_STORE.to_read_event(CLEAR_STORE.to_stored_event(event)) == event


def json_can_hold(value: object) -> bool:
    """Whether ``value`` holds no NaN or infinity (JSON has none: they are stored as null)."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(json_can_hold(item) for item in value.values())
    if isinstance(value, list | tuple):
        return all(json_can_hold(item) for item in value)
    return True


@pytest.mark.parametrize("cls", CHANNEL_EVENTS, ids=lambda cls: cls.__qualname__)
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_body_with_a_member_its_class_lacks_is_refused_both_ways(
    cls: type[DomainEvent], data: st.DataObject
) -> None:
    event = data.draw(events(cls))
    stored = CLEAR_STORE.to_stored_event(event)
    fields = {**CLEAR_STORE.body_of(stored), "written_by_a_newer_actae": 1}
    topic, version = stored.topic, stored.originator_version
    body = stamped(topic, stored.originator_id, version, orjson.dumps(fields))
    tampered = StoredEvent(stored.originator_id, version, topic, body)

    assert projected(CLEAR_STORE.to_read_event, tampered) == "refused"
    assert projected(CLEAR_STORE.to_domain_event, tampered) == "refused"
