"""A first event builds its aggregate directly, exactly as eventsourcing's own ``mutate`` would.

``Aggregate.Created.mutate`` skips eventsourcing's matching of the event's fields against the
initialisers' signatures; these tests hold it to the same result for every created-event
class the registry knows, and to eventsourcing's refusal of a first event that comes later.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

import pytest
from eventsourcing.domain import CanInitAggregate, OriginatorVersionError

from actae.domain.aggregate import Aggregate, folded
from actae.domain.channel import Channel
from actae.domain.effects import RetryPolicy
from actae.domain.type_names import declared_names
from actae.domain.values import ForkRecord, Inheritance, Pins, RunStatus

AT = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
PINS = Pins(model="m-1", prompt="p-1", tools=None, schema_=2)
RUN = {"workflow_id": "w", "agent_id": "a", "channel_id": uuid4(), "pins": PINS}
FORK = ForkRecord(
    child_run_id=uuid4(),
    child_channel_id=uuid4(),
    parent_run_id=uuid4(),
    parent_channel_id=uuid4(),
    requested_boundary=3,
    resolved_boundary=2,
    state_version=1,
    state_checksum="c" * 64,
    pins=PINS,
    reason="try again",
    created_at=AT,
    operation_id="op-fork",
    inherited=Inheritance(through_cursor=3, steps=1, in_doubt=["e-1"]),
)
FIELDS: dict[str, dict[str, Any]] = {
    "Channel.Opened": {
        "run_id": uuid4(),
        "kind": "run.started",
        "payload": {"input": 1},
        "operation_id": "op-1",
        "state_version": 1,
        "state_cursor": 1,
        "open_effects": ("e-1",),
        "usage": {"tokens": 3.0},
        "fingerprint": "f" * 64,
        "state": {"n": 1},
        "state_checksum": "s" * 64,
    },
    "Operation.Executed": {
        "operation_id": "op-2",
        "command": "transition",
        "fingerprint": "f" * 64,
        "result": {"cursor": 2},
    },
    "Operation.Registered": {
        "operation_id": "run:e-1",
        "run_id": uuid4(),
        "channel_id": uuid4(),
        "request": {"url": "https://example.test"},
        "fingerprint": "f" * 64,
        "policy": RetryPolicy(max_attempts=2),
    },
    "Run.Started": {
        **RUN,
        "deadline": AT,
        "parent_run_id": FORK.parent_run_id,
        "forked_from": FORK,
        "operation_id": "op-3",
        "budget": {"tokens": 10.0},
        "trace_context": {"traceparent": "00-abc-def-01"},
    },
    "Run.Purged": {
        **RUN,
        "parent_run_id": None,
        "forked_from": None,
        "forks": [FORK],
        "children": [uuid4()],
        "status": RunStatus.COMPLETED,
        "started_at": AT,
        "ended_at": AT,
        "forgotten_at": None,
        "cursor": 7,
        "state_version": 3,
        "usage": {"tokens": 5.0},
        "events": 12,
        "policy": "default",
        "actor": "retention",
    },
    "Retention.Defined": {"agent": None, "keep": {"completed": 60.0}, "actor": "ops"},
}
"""One first event of each created-event class, every field set (nothing left to defaults)."""


def created_events() -> list[Aggregate.Created]:
    return [
        cls(
            originator_id=uuid4(),
            originator_version=1,
            timestamp=AT,
            originator_topic=name.partition(".")[0],
            **FIELDS[name],
        )
        for name, cls in declared_names().items()
        if issubclass(cls, Aggregate.Created)
    ]


def test_every_created_event_class_has_an_example() -> None:
    names = {event.type_name for event in created_events()}
    assert names == set(FIELDS)


@pytest.mark.parametrize("event", created_events(), ids=lambda event: event.type_name)
def test_a_first_event_builds_what_eventsourcing_would(event: Aggregate.Created) -> None:
    ours: Any = event.mutate(None)
    theirs: Any = CanInitAggregate.mutate(event, None)

    assert type(ours) is type(theirs)
    assert vars(ours) == vars(theirs)
    assert (ours.id, ours.version, ours.created_on) == (event.originator_id, 1, AT)


@pytest.mark.parametrize("event", created_events(), ids=lambda event: event.type_name)
def test_a_first_event_after_others_is_refused(event: Aggregate.Created) -> None:
    if type(event).mutate is not Aggregate.Created.mutate:
        pytest.skip(f"{event.type_name} defines what meeting a history means")
    existing = event.mutate(None)

    with pytest.raises(OriginatorVersionError):
        event.mutate(existing)


def test_a_history_that_opens_twice_does_not_fold() -> None:
    opened = next(event for event in created_events() if isinstance(event, Channel.Opened))
    again = opened.model_copy(update={"originator_version": 2})

    with pytest.raises(OriginatorVersionError):
        folded([opened, again])


def test_an_aggregate_whose_init_takes_parameters_is_refused() -> None:
    def __init__(self: object, label: str) -> None:  # noqa: N807
        del self, label

    with pytest.raises(TypeError, match=r"Odd\.__init__ must take no parameters"):
        type("Odd", (Aggregate,), {"__module__": __name__, "__init__": __init__})
