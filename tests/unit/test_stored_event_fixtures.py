"""Stored events written by earlier builds must still decode (topics name module paths).

If this fails after moving or renaming an event class, register the old topic with
``eventsourcing.utils.register_topic`` instead of editing the fixture.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from eventsourcing.persistence import StoredEvent

from actae.adapters.codec import OrjsonTranscoder, PydanticMapper
from actae.domain.aggregate import DomainEvent

FIXTURES = json.loads(
    (Path(__file__).parents[1] / "fixtures" / "stored_events_v1.json").read_text()
)
EXPECTED_TOPICS = {
    "actae.domain.channel:Channel.Opened",
    "actae.domain.channel:Channel.Recorded",
    "actae.domain.channel:Channel.Transitioned",
    "actae.domain.operation:Operation.Executed",
    "actae.domain.run:Run.Forked",
    "actae.domain.run:Run.Started",
}


def test_fixtures_cover_every_event_type() -> None:
    assert {row["topic"] for row in FIXTURES} == EXPECTED_TOPICS


@pytest.mark.parametrize("row", FIXTURES, ids=lambda row: row["topic"])
def test_stored_event_decodes_and_round_trips(row: dict[str, object]) -> None:
    mapper = PydanticMapper(transcoder=OrjsonTranscoder())
    stored = StoredEvent(
        originator_id=uuid.UUID(str(row["originator_id"])),
        originator_version=int(str(row["originator_version"])),
        topic=str(row["topic"]),
        state=str(row["state"]).encode(),
    )

    event = mapper.to_domain_event(stored)

    assert isinstance(event, DomainEvent)
    assert mapper.to_domain_event(mapper.to_stored_event(event)) == event
