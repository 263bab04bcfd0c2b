"""The command path saves an operation record without building its aggregate."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from actae.adapters.codec import OrjsonTranscoder, PydanticMapper
from actae.domain.operation import Operation


def test_the_direct_event_is_stored_exactly_as_eventsourcing_would_create_it() -> None:
    fields: dict[str, Any] = {
        "operation_id": "run-7:step-3",
        "command": "transition",
        "fingerprint": "f" * 64,
        "result": {"cursor": 4, "state_version": 2},
        "at": datetime(2026, 11, 29, 12, 0, tzinfo=UTC),
    }
    mapper = PydanticMapper(OrjsonTranscoder())
    at = fields.pop("at")
    made = Operation._create(
        Operation.Executed, id=Operation.id_for(fields["operation_id"]), timestamp=at, **fields
    )
    via_aggregate = mapper.to_stored_event(made.collect_events()[0])
    fields["at"] = at
    direct = mapper.to_stored_event(Operation.executed(**fields))
    assert direct == via_aggregate
    rebuilt = Operation.executed(**fields).mutate(None)
    assert isinstance(rebuilt, Operation)
    assert rebuilt.recorded_result == fields["result"]
