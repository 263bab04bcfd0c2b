"""Contract: every part of a command's content is in its fingerprint (every backend).

A repeat under the same ``operation_id`` replays the original result only when it says the
same thing. A part left out of the fingerprint would turn a *different* command into a silent
replay: the caller would believe its new state, reason or pins were written. So each case
below changes one part of an executed command and must get ``OperationConflictError``, with
nothing written.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

import actae


def global_position(store: actae.Store) -> int | None:
    position: int | None = store._service.recorder.max_notification_id()
    return position


def started(store: actae.Store, workflow_id: str = "wf") -> actae.RunInfo:
    return store.start_run(workflow_id, agent_id="a", state={"n": 0})


STEP: dict[str, Any] = {"kind": "step", "payload": {"p": 1}, "state": {"n": 1}}


@pytest.mark.parametrize("change", [{"state": {"n": 2}}, {"payload": {"p": 2}}, {"kind": "other"}])
@pytest.mark.parametrize("expectations", ["stale", "fresh"])
def test_a_transition_repeated_with_other_content_is_refused(
    store: actae.Store, change: dict[str, Any], expectations: str
) -> None:
    """Stale expectations find the operation after the head check; fresh ones at the save."""
    run = started(store)
    store.transition(
        run.channel_id, expected_version=1, expected_cursor=1, operation_id="wf:step:1", **STEP
    )
    before = global_position(store)
    at = (1, 1) if expectations == "stale" else (2, 2)

    with pytest.raises(actae.OperationConflictError) as caught:
        store.transition(
            run.channel_id,
            expected_version=at[0],
            expected_cursor=at[1],
            operation_id="wf:step:1",
            **{**STEP, **change},
        )

    assert caught.value.operation_id == "wf:step:1"
    assert caught.value.recorded_fingerprint != caught.value.presented_fingerprint
    assert global_position(store) == before
    assert store.state_at(run.channel_id).state == {"n": 1}


def test_a_transition_id_reused_on_another_channel_is_refused(store: actae.Store) -> None:
    one, two = started(store, "wf-1"), started(store, "wf-2")
    store.transition(
        one.channel_id, expected_version=1, expected_cursor=1, operation_id="op", **STEP
    )

    with pytest.raises(actae.OperationConflictError):
        store.transition(
            two.channel_id, expected_version=1, expected_cursor=1, operation_id="op", **STEP
        )

    assert store.head(two.channel_id).cursor == 1


def test_a_record_repeated_with_other_usage_is_refused(store: actae.Store) -> None:
    """The budget counts the usage that was recorded, so a different one must not replay."""
    run = started(store)
    args: dict[str, Any] = {"kind": "llm", "payload": {}, "operation_id": "wf:llm:1"}
    store.record(run.channel_id, expected_cursor=1, usage={"tokens": 10}, **args)

    with pytest.raises(actae.OperationConflictError):
        store.record(run.channel_id, expected_cursor=2, usage={"tokens": 20}, **args)
    with pytest.raises(actae.OperationConflictError):
        store.record(run.channel_id, expected_cursor=2, **args)
    again = store.record(run.channel_id, expected_cursor=1, usage={"tokens": 10}, **args)

    assert (again.replayed, again.cursor) == (True, 2)
    assert store.run(run.run_id).usage == {"tokens": 10.0}


START: dict[str, Any] = {
    "agent_id": "a",
    "state": {"n": 0},
    "pins": {"model": "m-1"},
    "budget": {"tokens": 100},
    "operation_id": "start:wf",
}


@pytest.mark.parametrize(
    "change",
    [
        {"agent_id": "b"},
        {"pins": {"model": "m-2"}},
        {"pins": {}},
        {"budget": {"tokens": 200}},
        {"budget": None},
        {"deadline": datetime(2030, 1, 1, tzinfo=UTC)},
        {"parent_run_id": "parent"},
    ],
    ids=["agent", "pins", "no-pins", "budget", "no-budget", "deadline", "parent"],
)
def test_a_start_repeated_with_other_content_is_refused(
    store: actae.Store, change: dict[str, Any]
) -> None:
    parent = started(store, "parent")
    if change.get("parent_run_id") == "parent":
        change = {"parent_run_id": parent.run_id}
    first = store.start_run("wf", **START)
    before = global_position(store)

    with pytest.raises(actae.OperationConflictError):
        store.start_run("wf", **{**START, **change})

    assert global_position(store) == before
    assert store.start_run("wf", **START).run_id == first.run_id


def prepared(store: actae.Store) -> actae.RunInfo:
    """A run with cursors 1 (state v1), 2 (a record) and 3 (state v2)."""
    run = store.start_run("wf", agent_id="a", state={"step": 0}, pins={"model": "m-1"})
    store.record(run.channel_id, kind="llm", payload={}, expected_cursor=1)
    store.transition(
        run.channel_id,
        kind="s",
        payload={},
        state={"step": 1},
        expected_version=1,
        expected_cursor=2,
    )
    return run


FORK: dict[str, Any] = {
    "at": 2,
    "operation_id": "fork:1",
    "reason": "cheaper",
    "pins": {"model": "m-2"},
}


@pytest.mark.parametrize(
    "change",
    [
        {"reason": "faster"},
        {"reason": None},
        {"pins": {"model": "m-3"}},
        {"pins": {"model": "m-2", "prompt": "p9"}},
        {"pins": None},
        {"at": 1},
    ],
    ids=["reason", "no-reason", "pins", "more-pins", "no-pins", "boundary"],
)
def test_a_fork_repeated_with_other_content_is_refused(
    store: actae.Store, change: dict[str, Any]
) -> None:
    """The receipt says why and with which pins the child runs; a repeat cannot change that."""
    run = prepared(store)
    first = store.fork(run.channel_id, **FORK)
    before = global_position(store)

    with pytest.raises(actae.OperationConflictError) as caught:
        store.fork(run.channel_id, **{**FORK, **change})

    assert caught.value.operation_id == "fork:1"
    assert global_position(store) == before
    assert store.lineage(run.run_id).descendants == [first]
    again = store.fork(run.channel_id, **FORK)
    assert (again.replayed, again.child_run_id, again.reason) == (
        True,
        first.child_run_id,
        "cheaper",
    )


def test_a_fork_id_reused_on_another_channel_is_refused(store: actae.Store) -> None:
    one, two = prepared(store), prepared(store)
    store.fork(one.channel_id, **FORK)

    with pytest.raises(actae.OperationConflictError):
        store.fork(two.channel_id, **FORK)

    assert store.lineage(two.run_id).descendants == []
