"""The command path saves an operation record without building its aggregate."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from uuid import UUID, uuid5

from hypothesis import given
from hypothesis import strategies as st

from actae.adapters.persistence.codec import OrjsonTranscoder, PydanticMapper
from actae.domain.aggregate import folded
from actae.domain.effects import RetryPolicy
from actae.domain.operation import OPERATION_NAMESPACE, Operation


def test_the_direct_event_is_stored_exactly_as_the_aggregate_would_create_it() -> None:
    fields: dict[str, Any] = {
        "operation_id": "run-7:step-3",
        "command": "transition",
        "fingerprint": "f" * 64,
        "result": {"cursor": 4, "state_version": 2},
        "at": datetime(2026, 11, 29, 12, 0, tzinfo=UTC),
    }
    mapper = PydanticMapper(OrjsonTranscoder())
    at = fields.pop("at")
    made = Operation.created(
        Operation.Executed,
        originator_id=Operation.id_for(fields["operation_id"]),
        timestamp=at,
        **fields,
    )
    via_aggregate = mapper.to_stored_event(made.collect_events()[0])
    fields["at"] = at
    direct = mapper.to_stored_event(Operation.executed(**fields))
    assert direct == via_aggregate
    rebuilt = Operation.executed(**fields).mutate(None)
    assert isinstance(rebuilt, Operation)
    assert rebuilt.recorded_result == fields["result"]


@given(st.text())
def test_an_operation_id_maps_to_the_uuid5_of_the_namespace(operation_id: str) -> None:
    """Stored operation records are found by this id: it must stay ``uuid5``, bit for bit."""
    assert Operation.id_for(operation_id) == uuid5(OPERATION_NAMESPACE, operation_id)


def test_an_operation_id_maps_to_the_same_id_in_every_release() -> None:
    assert Operation.id_for("run-7:step-3") == UUID("fc596373-9634-5bc3-ab33-36e34e9b7598")


@given(
    lease=st.floats(min_value=0.001, max_value=7 * 24 * 3600.0),
    timeout=st.none() | st.floats(min_value=0.001, max_value=7 * 24 * 3600.0),
    same=st.booleans(),
    request=st.dictionaries(
        st.text(max_size=5), st.integers(-(2**53), 2**53) | st.text(max_size=5), max_size=3
    ),
)
def test_a_first_claim_is_stored_exactly_as_the_aggregate_would_register_and_claim(
    lease: float, timeout: float | None, same: bool, request: dict[str, Any]
) -> None:
    """The claim's hot path builds its two events directly; rows and aggregate are the same."""
    at = datetime(2026, 11, 29, 12, 0, 0, 123456, tzinfo=UTC)
    timeout = lease if same else timeout
    fields: dict[str, Any] = {
        "run_id": UUID("1e8a77d0-0000-4000-8000-000000000001"),
        "channel_id": UUID("1e8a77d0-0000-4000-8000-000000000002"),
        "request": request,
        "fingerprint": "f" * 64,
        "policy": RetryPolicy(max_attempts=3),
    }
    made = Operation.created(
        Operation.Registered,
        originator_id=Operation.id_for("run-7:charge"),
        timestamp=at,
        operation_id="run-7:charge",
        **fields,
    )
    claimed = made.claim(worker="w1", lease=lease, timeout=timeout, now=at)
    via_aggregate = made.collect_events()
    direct = Operation.first_claim(
        effect_key="run-7:charge", worker="w1", lease=lease, timeout=timeout, at=at, **fields
    )
    mapper = PydanticMapper(OrjsonTranscoder())
    assert [mapper.to_stored_event(e) for e in direct] == [
        mapper.to_stored_event(e) for e in via_aggregate
    ]
    assert list(direct) == list(via_aggregate)
    assert claimed == direct[1]
    assert direct[0].request is not request  # copied, as validation copies it
    rebuilt = folded(direct)
    assert isinstance(rebuilt, Operation)
    assert rebuilt.info(at) == made.info(at)
