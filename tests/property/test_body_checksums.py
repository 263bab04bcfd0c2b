"""Property: any single changed byte of any stored body is refused as corruption.

Every body carries its checksum as its last JSON member
(``adapters/persistence/codec.py``). A byte changed in the body or in the digits fails
the checksum; a byte changed in the member's own name or punctuation makes the body look
like one written before checksums, and must then be refused as invalid JSON or as a member
that no event has. Both are checked here: events of every class drawn by hypothesis, and the
rows a real store writes (clear and encrypted), every byte of their checksum member changed
to every other value.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import uuid4

import orjson
import pytest
from eventsourcing.persistence import Mapper, StoredEvent
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import actae
from actae.adapters.custody.sealing import SEALED
from actae.adapters.persistence.codec import (
    CHECKSUM,
    LENGTH,
    TAIL,
    OrjsonCodec,
    stamped,
    verified,
)
from actae.domain.aggregate import DomainEvent
from actae.domain.channel import Channel
from actae.domain.validation import require_document
from tests.custody.sealed import keyring_file
from tests.property.test_encoders import CLASSES, CLEAR_STORE, MAPPER, events


def changed(stored: StoredEvent, offset: int, mask: int) -> StoredEvent:
    """``stored`` with the byte at ``offset`` XORed with ``mask`` (not 0)."""
    state = bytearray(stored.state)
    state[offset] ^= mask
    return dataclasses.replace(stored, state=bytes(state))


def refused(mapper: Mapper[Any], stored: StoredEvent) -> None:
    with pytest.raises(actae.CorruptionError):
        mapper.to_domain_event(stored)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__qualname__)
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_changed_byte_of_any_event_body_is_refused(
    cls: type[DomainEvent], data: st.DataObject
) -> None:
    event = data.draw(events(cls))
    mapper = data.draw(st.sampled_from([MAPPER, CLEAR_STORE]))
    try:
        stored = mapper.to_stored_event(event)
    except orjson.JSONEncodeError:
        assume(False)
    try:
        mapper.to_domain_event(stored)  # the body as written is accepted...
    except actae.CorruptionError:
        assume(False)  # ...unless no store would write it (inf: validation refuses it first)
    offset = data.draw(st.integers(0, len(stored.state) - 1))
    mask = data.draw(st.integers(1, 255))

    refused(mapper, changed(stored, offset, mask))


@pytest.fixture(params=["clear", "encrypted"])
def written_rows(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Any, list[Any]]]:
    """A real store's mapper, and the rows a run with a step and an effect left in it."""
    keyring = str(keyring_file(tmp_path)) if request.param == "encrypted" else None
    with actae.open("memory://", keyring=keyring) as store:
        run = store.start_run("wf", agent_id="agent", state={"step": 0})
        store.resume(run.run_id, worker="w1").step("charge", lambda: {"result": "ok"})
        claim = store.claim("pay-1", run_id=run.run_id, worker="w1", lease=30, request={})
        store.complete_effect("pay-1", token=claim.token, worker="w1", result={"r": 1})
        head = store.head(run.channel_id)
        store.transition(
            run.channel_id,
            kind="step",
            payload={"n": 1},
            state={"step": 1, "notes": ["x" * 40, {"nested": True}]},
            expected_version=head.state_version,
            expected_cursor=head.cursor,
            operation_id="transition-1",
        )
        service: Any = store._service
        rows = service.recorder.select_notifications(start=1, limit=10_000)
        yield (
            service.mapper,
            [
                StoredEvent(row.originator_id, row.originator_version, row.topic, row.state)
                for row in rows
            ],
        )


def test_every_byte_of_every_row_is_covered(written_rows: tuple[Any, list[Any]]) -> None:
    mapper, rows = written_rows
    chance = random.Random(28)  # noqa: S311 - a reproducible choice of changes
    for stored in rows:
        mapper.to_domain_event(stored)
        for offset in range(len(stored.state)):
            refused(mapper, changed(stored, offset, chance.randrange(1, 256)))


def test_every_value_of_every_byte_of_the_checksum_member_is_refused(
    written_rows: tuple[Any, list[Any]],
) -> None:
    mapper, rows = written_rows
    # a run's, a channel's, an operation's and a step result's row, and a transition's
    for stored in [*rows[:4], transition_row(rows)]:
        for offset in range(len(stored.state) - TAIL, len(stored.state)):
            for mask in range(1, 256):
                refused(mapper, changed(stored, offset, mask))


def transition_row(rows: list[Any]) -> Any:
    (row,) = (row for row in rows if row.topic == "Channel.Transitioned")
    return row


def test_a_transition_checksum_starts_from_its_state(written_rows: tuple[Any, list[Any]]) -> None:
    """In clear, the body ends with the state's canonical bytes, the ones its checksum
    hashed first (and the state checksum is of): the member's length counts them."""
    mapper, rows = written_rows
    stored = transition_row(rows)
    event = mapper.to_domain_event(stored)
    canonical = orjson.dumps(event.state, option=orjson.OPT_SORT_KEYS)
    if SEALED.encode() in stored.state:
        assert int(stored.state[-TAIL:][LENGTH]) == 0
    else:
        assert int(stored.state[-TAIL:][LENGTH]) == len(canonical)
        assert stored.state[:-TAIL].endswith(canonical)
        assert event.state_checksum == "sha256:" + hashlib.sha256(canonical).hexdigest()


def test_a_state_the_body_does_not_end_with_is_hashed_in_order() -> None:
    """Only bytes the body really ends with count as hashed by the state's own SHA-256."""
    state = require_document("state", {"a": 1}, OrjsonCodec(), max_bytes=1024)
    body = b'{"kind":"x","state":{"b":2}}'
    originator = uuid4()
    row = StoredEvent(
        originator, 1, "Channel.Recorded", stamped("Channel.Recorded", originator, 1, body, state)
    )
    assert row.state[-TAIL:][LENGTH] == b"0" * 10
    assert verified(row) == body


def test_a_body_moved_to_another_row_is_refused(written_rows: tuple[Any, list[Any]]) -> None:
    mapper, rows = written_rows
    first, second = rows[0], rows[1]
    refused(mapper, dataclasses.replace(first, originator_version=first.originator_version + 1))
    refused(mapper, dataclasses.replace(first, originator_id=second.originator_id))
    refused(mapper, dataclasses.replace(first, topic=second.topic))


def test_a_body_without_its_checksum_is_refused() -> None:
    """Every body Actae writes has one: the encoder's bytes alone, well formed as they are,
    are a row that changed below Actae."""
    event = Channel.Recorded(
        originator_id=uuid4(),
        originator_version=2,
        timestamp=datetime.now(UTC),
        run_id=uuid4(),
        kind="step.result",
        payload={"name": "charge", "value": 1},
        operation_id=None,
        state_version=1,
        state_cursor=1,
    )
    stored = MAPPER.to_stored_event(event)
    bare = dataclasses.replace(stored, state=verified(stored))
    assert MAPPER.to_domain_event(stored) == event
    with pytest.raises(actae.CorruptionError, match="has no checksum member"):
        MAPPER.to_domain_event(bare)


def test_no_event_field_is_one_byte_from_the_checksum_member() -> None:
    """What lets a damaged member be refused: events forbid unknown members, and no field
    name could be what a changed byte makes of the member's name."""
    for cls in CLASSES:
        assert cls.model_config.get("extra") == "forbid", cls
        for name in cls.model_fields:
            if len(name) == len(CHECKSUM):
                assert sum(a != b for a, b in zip(name, CHECKSUM, strict=True)) > 1, name
