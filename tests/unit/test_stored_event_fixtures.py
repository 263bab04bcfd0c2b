"""Stored events written by earlier builds must still decode (topics name module paths).

If this fails after moving or renaming an event class, register the old topic with
``eventsourcing.utils.register_topic`` instead of editing the fixture.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from pathlib import Path

import orjson
import pytest
from eventsourcing.persistence import StoredEvent
from eventsourcing.utils import get_topic

from actae.adapters.persistence.checksums import verified
from actae.adapters.persistence.codec import OrjsonTranscoder, PydanticMapper
from actae.domain.aggregate import DomainEvent
from actae.domain.channel import Channel
from actae.domain.operation import Operation
from actae.domain.retention import Retention
from actae.domain.run import Run

FOLDER = Path(__file__).parents[1] / "fixtures"
FIXTURES = [
    {**row, "file": path.name}
    for path in sorted(FOLDER.glob("stored_events_v*.json"))
    for row in json.loads(path.read_text())
]


def event_topics() -> set[str]:
    """Every concrete event class of every aggregate, as a stored topic."""
    topics = set()
    for aggregate in (Channel, Operation, Run, Retention):
        for name, value in vars(aggregate).items():
            if (
                isinstance(value, type)
                and issubclass(value, DomainEvent)
                and name not in ("Event", "Created")
            ):
                topics.add(get_topic(value))
    return topics


def test_fixtures_cover_every_event_type() -> None:
    assert {row["topic"] for row in FIXTURES} == event_topics()


MAPPER = PydanticMapper(transcoder=OrjsonTranscoder())
EACH_ROW = pytest.mark.parametrize("row", FIXTURES, ids=lambda row: f"{row['file']}:{row['topic']}")


def decoded(row: dict[str, object]) -> DomainEvent:
    """The fixture row's stored event, decoded by today's mapper."""
    stored = StoredEvent(
        originator_id=uuid.UUID(str(row["originator_id"])),
        originator_version=int(str(row["originator_version"])),
        topic=str(row["topic"]),
        state=str(row["state"]).encode(),
    )
    event = MAPPER.to_domain_event(stored)
    assert isinstance(event, DomainEvent)
    return event


@EACH_ROW
def test_stored_event_decodes_and_round_trips(row: dict[str, object]) -> None:
    event = decoded(row)

    assert MAPPER.to_domain_event(MAPPER.to_stored_event(event)) == event


@EACH_ROW
def test_the_fast_encoding_writes_what_model_dump_writes(row: dict[str, object]) -> None:
    """Events are encoded by their class's compiled encoder (persistence/encoders.py): same JSON."""
    event = decoded(row)
    encoded = orjson.loads(verified(MAPPER.to_stored_event(event)))  # less its checksum
    dumped = event.model_dump(exclude={"originator_id", "originator_version"})
    if getattr(type(event), "class_version", 1) > 1:
        dumped["class_version"] = type(event).class_version  # type: ignore[attr-defined]
    assert encoded == orjson.loads(orjson.dumps(dumped))


V1_CHANNEL_ROWS = [
    row
    for row in FIXTURES
    if row["file"] == "stored_events_v1.json"
    and str(row["topic"]).startswith("actae.domain.channel")
]


def test_version_1_fixtures_hold_channel_events_to_upcast() -> None:
    assert {str(row["topic"]).split(".")[-1] for row in V1_CHANNEL_ROWS} == {
        "Opened",
        "Recorded",
        "Transitioned",
    }


@pytest.mark.parametrize("row", V1_CHANNEL_ROWS, ids=lambda row: str(row["topic"]))
def test_a_version_1_channel_event_upcasts_to_no_open_effects_and_keeps_the_rest(
    row: dict[str, object],
) -> None:
    """v1 -> v2 adds ``open_effects = ()`` (no ledger existed) and changes nothing else."""
    stored = json.loads(str(row["state"]))
    assert "class_version" not in stored
    assert "open_effects" not in stored

    event = decoded(row)

    assert isinstance(event, Channel.Event)
    assert event.open_effects == ()
    assert event.usage == {}
    assert event.timestamp == datetime.fromisoformat(stored.pop("timestamp"))
    identity_and_new = {
        "originator_id",
        "originator_version",
        "timestamp",
        "open_effects",
        "usage",
        "redacted",  # a record's redaction counts: empty for events from before redaction
        "fingerprint",  # the command's fingerprint: none on events from before schema 4
    }
    assert event.model_dump(mode="json", exclude=identity_and_new) == stored
    again = orjson.loads(verified(MAPPER.to_stored_event(event)))
    assert (again["class_version"], again["open_effects"], again["usage"]) == (2, [], {})
    assert event.fingerprint is None
    assert event.stored_operation_id is None  # its record, if any, is an Operation row
