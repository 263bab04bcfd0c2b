"""The command path saves an operation record without building its aggregate."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from uuid import UUID, uuid5

from hypothesis import given
from hypothesis import strategies as st

from actae.adapters.persistence.codec import OrjsonTranscoder, PydanticMapper
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
