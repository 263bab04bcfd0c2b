"""A stored event's topic names a module: a tampered one must not get anything imported."""

from __future__ import annotations

import sys
import uuid

import pytest
from eventsourcing.persistence import StoredEvent

import actae
from actae.adapters.persistence.codec import OrjsonTranscoder, PydanticMapper

MAPPER = PydanticMapper(transcoder=OrjsonTranscoder())


def stored(topic: str) -> StoredEvent:
    return StoredEvent(originator_id=uuid.uuid4(), originator_version=1, topic=topic, state=b"{}")


@pytest.mark.parametrize(
    "topic",
    [
        "json.tool:main",  # a module nobody imported: importing it would run its code
        "os:system",
        "actae.adapters.cli.main:main",  # Actae's, but not an event
        "actae.domain.errors:CorruptionError",  # an Actae class, but not an event
    ],
)
def test_a_topic_that_is_not_an_actae_event_is_refused_unimported(topic: str) -> None:
    module = topic.split(":", maxsplit=1)[0]
    was_loaded = module in sys.modules

    with pytest.raises(actae.CorruptionError, match="is not an Actae event"):
        MAPPER.to_domain_event(stored(topic))

    if not was_loaded and not module.startswith("actae."):
        assert module not in sys.modules
