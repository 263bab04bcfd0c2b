"""Contract: starting runs, recording, transitioning, reading back (every backend)."""

from __future__ import annotations

import pytest

import actae

PINS = {"model": "m-1", "prompt": "p3", "tools": "t2", "schema": 1}


def start(store: actae.Store, name: str = "invoice-42") -> actae.RunInfo:
    return store.start_run(
        name, agent_id="planner", state={"step": 0}, pins=PINS, operation_id=f"start:{name}"
    )


def test_start_run_opens_main_channel_at_cursor_one(store: actae.Store) -> None:
    run = start(store)

    assert (run.cursor, run.state_version, run.replayed) == (1, 1, False)
    assert run.workflow_id == "invoice-42"
    assert run.agent_id == "planner"
    assert run.pins.as_dict() == PINS
    assert run.status is actae.RunStatus.RUNNING
    assert store.state_at(run.channel_id).state == {"step": 0}
    assert store.run(run.run_id) == run


def test_record_keeps_state_version_and_transition_creates_the_next(store: actae.Store) -> None:
    run = start(store)

    recorded = store.record(
        run.channel_id, kind="model.call", payload={"tokens": 812}, expected_cursor=1
    )
    moved = store.transition(
        run.channel_id,
        kind="step.done",
        payload={"n": 1},
        state={"step": 1},
        expected_version=1,
        expected_cursor=2,
    )

    assert (recorded.cursor, recorded.state_version) == (2, 1)
    assert (moved.cursor, moved.state_version) == (3, 2)
    assert store.head(run.channel_id) == moved


def test_events_list_the_gapless_log_with_state_versions(store: actae.Store) -> None:
    run = start(store)
    store.record(run.channel_id, kind="model.call", payload={"t": 1}, expected_cursor=1)
    store.transition(
        run.channel_id,
        kind="step.done",
        payload={"n": 1},
        state={"step": 1},
        expected_version=1,
        expected_cursor=2,
        operation_id="invoice-42:step:1",
    )

    events = store.events(run.channel_id)

    assert [e.cursor for e in events] == [1, 2, 3]
    assert [e.kind for e in events] == ["run.started", "model.call", "step.done"]
    assert [(e.state_version, e.state_cursor) for e in events] == [(1, 1), (1, 1), (2, 3)]
    assert events[2].operation_id == "invoice-42:step:1"
    assert all(e.run_id == run.run_id for e in events)
    assert [e.cursor for e in store.events(run.channel_id, after=1, limit=1)] == [2]
    assert store.events(run.channel_id, after=3) == []


def test_state_at_resolves_to_the_version_in_force(store: actae.Store) -> None:
    run = start(store)
    store.record(run.channel_id, kind="model.call", payload={}, expected_cursor=1)
    store.transition(
        run.channel_id,
        kind="step",
        payload={},
        state={"step": 1},
        expected_version=1,
        expected_cursor=2,
    )
    store.record(run.channel_id, kind="tool.result", payload={}, expected_cursor=3)

    at_two = store.state_at(run.channel_id, cursor=2)
    at_four = store.state_at(run.channel_id, cursor=4)

    assert (at_two.version, at_two.cursor, at_two.state) == (1, 1, {"step": 0})
    assert (at_four.version, at_four.cursor, at_four.state) == (2, 3, {"step": 1})
    assert at_four.checksum.startswith("sha256:")
    assert at_four == store.state_at(run.channel_id)


def test_stale_cursor_writes_nothing_and_reports_actual_values(store: actae.Store) -> None:
    run = start(store)
    store.record(run.channel_id, kind="a", payload={}, expected_cursor=1)

    with pytest.raises(actae.ConflictError) as caught:
        store.record(run.channel_id, kind="b", payload={}, expected_cursor=1)

    error = caught.value
    assert (error.expected_cursor, error.actual_cursor) == (1, 2)
    assert (error.actual_version, error.channel_id) == (1, run.channel_id)
    assert store.head(run.channel_id).cursor == 2


def test_stale_version_writes_nothing(store: actae.Store) -> None:
    run = start(store)
    store.transition(
        run.channel_id, kind="s", payload={}, state={"a": 1}, expected_version=1, expected_cursor=1
    )

    with pytest.raises(actae.ConflictError) as caught:
        store.transition(
            run.channel_id,
            kind="s",
            payload={},
            state={"a": 2},
            expected_version=1,
            expected_cursor=2,
        )

    assert (caught.value.expected_version, caught.value.actual_version) == (1, 2)
    assert store.head(run.channel_id).cursor == 2
    assert store.state_at(run.channel_id).state == {"a": 1}


def test_recover_is_state_at_head_plus_recorded_events_after_it(store: actae.Store) -> None:
    run = start(store)
    store.transition(
        run.channel_id,
        kind="s",
        payload={},
        state={"step": 1},
        expected_version=1,
        expected_cursor=1,
    )
    store.record(run.channel_id, kind="model.call", payload={"answer": 42}, expected_cursor=2)
    store.record(run.channel_id, kind="tool.result", payload={"ok": True}, expected_cursor=3)

    recovery = store.recover(run.channel_id)

    assert (recovery.state.version, recovery.state.cursor) == (2, 2)
    assert recovery.state.state == {"step": 1}
    assert [(e.cursor, e.payload) for e in recovery.events] == [
        (3, {"answer": 42}),
        (4, {"ok": True}),
    ]
    assert recovery.head_cursor == 4
    assert recovery.outstanding == []


def test_unknown_ids_and_cursors_past_the_head_are_not_found(store: actae.Store) -> None:
    run = start(store)
    missing = "00000000-0000-4000-8000-000000000000"

    for call in (
        lambda: store.head(missing),
        lambda: store.state_at(missing),
        lambda: store.events(missing),
        lambda: store.recover(missing),
        lambda: store.run(missing),
        lambda: store.lineage(missing),
        lambda: store.state_at(run.channel_id, cursor=2),
        lambda: store.events(run.channel_id, after=2),
        lambda: store.run(run.channel_id),
        lambda: store.head(run.run_id),
        lambda: store.record(missing, kind="k", payload={}, expected_cursor=1),
        lambda: store.fork(run.channel_id, at=2),
    ):
        with pytest.raises(actae.NotFoundError):
            call()


def test_string_ids_are_accepted(store: actae.Store) -> None:
    run = start(store)

    receipt = store.record(str(run.channel_id), kind="k", payload={}, expected_cursor=1)

    assert receipt.channel_id == run.channel_id
    assert store.run(str(run.run_id)).cursor == 2
