"""Contract: forks resolve their boundary, copy state, inherit pins and leave receipts."""

from __future__ import annotations

import pytest

import actae


def prepared(store: actae.Store) -> actae.RunInfo:
    """A run with cursors: 1 start (v1), 2 record, 3 transition (v2), 4 record."""
    run = store.start_run(
        "wf",
        agent_id="planner",
        state={"step": 0},
        pins={"model": "m-1", "prompt": "p3", "tools": "t2", "schema": 1},
        operation_id="start:wf",
    )
    store.record(run.channel_id, kind="llm", payload={}, expected_cursor=1)
    store.transition(
        run.channel_id,
        kind="step",
        payload={},
        state={"step": 1},
        expected_version=1,
        expected_cursor=2,
    )
    store.record(run.channel_id, kind="llm", payload={}, expected_cursor=3)
    return run


def test_fork_resolves_to_where_the_state_in_force_was_created(store: actae.Store) -> None:
    run = prepared(store)

    receipt = store.fork(
        run.channel_id, at=2, operation_id="fork:1", reason="cheaper", pins={"model": "m-2"}
    )

    assert (receipt.requested_boundary, receipt.resolved_boundary) == (2, 1)
    assert receipt.state_version == 1
    assert receipt.state_checksum == store.state_at(run.channel_id, cursor=1).checksum
    assert (receipt.parent_run_id, receipt.parent_channel_id) == (run.run_id, run.channel_id)
    assert receipt.pins.as_dict() == {"model": "m-2", "prompt": "p3", "tools": "t2", "schema": 1}
    assert (receipt.reason, receipt.operation_id, receipt.replayed) == ("cheaper", "fork:1", False)
    child = store.state_at(receipt.child_channel_id)
    assert (child.version, child.cursor, child.state) == (1, 1, {"step": 0})
    assert child.checksum == receipt.state_checksum


def test_fork_at_a_transition_keeps_that_cursor(store: actae.Store) -> None:
    run = prepared(store)

    receipt = store.fork(run.channel_id, at=4)

    assert (receipt.resolved_boundary, receipt.state_version) == (3, 2)
    assert store.state_at(receipt.child_channel_id).state == {"step": 1}


def test_child_run_continues_independently(store: actae.Store) -> None:
    run = prepared(store)
    receipt = store.fork(run.channel_id, at=2)

    store.transition(
        receipt.child_channel_id,
        kind="step",
        payload={},
        state={"step": "child"},
        expected_version=1,
        expected_cursor=1,
    )

    assert store.state_at(run.channel_id).state == {"step": 1}
    assert store.state_at(receipt.child_channel_id).state == {"step": "child"}
    child_run = store.run(receipt.child_run_id)
    assert child_run.forked_from == receipt
    assert child_run.workflow_id == "wf"
    assert store.events(receipt.child_channel_id)[0].kind == "run.forked"


def test_repeated_fork_replays_the_receipt(store: actae.Store) -> None:
    run = prepared(store)
    first = store.fork(run.channel_id, at=2, operation_id="fork:1", reason="r")

    again = store.fork(run.channel_id, at=2, operation_id="fork:1", reason="r")

    assert again.replayed is True
    assert again.child_run_id == first.child_run_id
    assert len(store.lineage(run.run_id).descendants) == 1
    with pytest.raises(actae.OperationConflictError):
        store.fork(run.channel_id, at=3, operation_id="fork:1", reason="r")


def test_fork_of_a_fork_and_lineage_both_ways(store: actae.Store) -> None:
    run = prepared(store)
    child = store.fork(run.channel_id, at=4, operation_id="fork:a")
    store.record(child.child_channel_id, kind="llm", payload={}, expected_cursor=1)
    grandchild = store.fork(child.child_channel_id, at=2, operation_id="fork:b")
    sibling = store.fork(run.channel_id, at=1, operation_id="fork:c")

    assert store.state_at(grandchild.child_channel_id).state == {"step": 1}
    assert grandchild.resolved_boundary == 1
    down = store.lineage(run.run_id)
    assert [r.child_run_id for r in down.ancestors] == []
    assert [r.child_run_id for r in down.descendants] == [
        child.child_run_id,
        sibling.child_run_id,
        grandchild.child_run_id,
    ]
    up = store.lineage(grandchild.child_run_id)
    assert [r.child_run_id for r in up.ancestors] == [grandchild.child_run_id, child.child_run_id]
    assert up.descendants == []
    assert up.run.run_id == grandchild.child_run_id
