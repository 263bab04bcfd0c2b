"""A stored topic is a type name: anything else is refused, and nothing is imported for it."""

from __future__ import annotations

import sys
import uuid
from datetime import UTC, datetime

import orjson
import pytest
from eventsourcing.persistence import StoredEvent

import actae
from actae.adapters.persistence.codec import OrjsonTranscoder, PydanticMapper, stamped
from actae.domain.retention import Retention

MAPPER = PydanticMapper(transcoder=OrjsonTranscoder())


def stored(topic: str) -> StoredEvent:
    """A row of ``topic`` whose body's checksum matches (the topic is checked next)."""
    originator = uuid.uuid4()
    body = stamped(topic, originator, 1, b'{"kind":"x"}')
    return StoredEvent(originator_id=originator, originator_version=1, topic=topic, state=body)


@pytest.mark.parametrize(
    "topic",
    [
        "json.tool:main",  # a module nobody imported: importing it would run its code
        "os:system",
        "actae.adapters.cli.main:main",  # Actae's, but not an event
        "actae.domain.errors:CorruptionError",  # an Actae class, but not an event
        "actae.domain.run:Run.Started",  # an event's module path: no longer its name
        "Run",  # an aggregate's type name, not an event's
        "Run.Begun",  # an Actae-looking name that no class declares
    ],
)
def test_a_topic_that_is_not_an_actae_event_is_refused_unimported(topic: str) -> None:
    module = topic.split(":", maxsplit=1)[0]
    was_loaded = module in sys.modules

    with pytest.raises(actae.CorruptionError, match="is not an Actae event"):
        MAPPER.to_domain_event(stored(topic))

    if not was_loaded and not module.startswith("actae."):
        assert module not in sys.modules


def test_a_first_event_naming_another_class_is_refused_unimported() -> None:
    """eventsourcing would resolve ``originator_topic`` as a module path, importing it."""
    (defined,) = Retention.define(
        agent=None, keep=None, actor="ops", at=datetime.now(UTC)
    ).collect_events()
    row = MAPPER.to_stored_event(defined)
    assert orjson.loads(row.state)["originator_topic"] == "Retention"
    body = orjson.loads(row.state)
    del body["$checksum"]
    body["originator_topic"] = "json.tool:main"
    tampered = StoredEvent(
        row.originator_id,
        row.originator_version,
        row.topic,
        stamped(row.topic, row.originator_id, row.originator_version, orjson.dumps(body)),
    )
    was_loaded = "json.tool" in sys.modules

    with pytest.raises(actae.CorruptionError, match="not the type name of this event's"):
        MAPPER.to_domain_event(tampered)

    assert was_loaded or "json.tool" not in sys.modules
