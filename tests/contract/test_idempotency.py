"""Contract: idempotency by content, checked before the version guards."""

from __future__ import annotations

from typing import Any

import pytest

import actae


def started(store: actae.Store) -> actae.RunInfo:
    return store.start_run("wf", agent_id="a", state={"n": 0}, operation_id="start:wf")


def test_repeated_start_replays_the_original_run(store: actae.Store) -> None:
    first = started(store)
    store.record(first.channel_id, kind="k", payload={}, expected_cursor=1)

    again = started(store)

    assert again.replayed is True
    assert (again.run_id, again.channel_id) == (first.run_id, first.channel_id)
    assert (again.cursor, again.state_version) == (1, 1)
    assert len(store.events(first.channel_id)) == 2


def test_retry_with_stale_expectations_replays_instead_of_conflicting(
    store: actae.Store,
) -> None:
    run = started(store)
    args: dict[str, Any] = {"kind": "step", "payload": {"n": 1}, "state": {"n": 1}}
    first = store.transition(
        run.channel_id, expected_version=1, expected_cursor=1, operation_id="wf:step:1", **args
    )
    store.record(run.channel_id, kind="later", payload={}, expected_cursor=2)

    retry = store.transition(
        run.channel_id, expected_version=1, expected_cursor=1, operation_id="wf:step:1", **args
    )

    assert retry.replayed is True
    assert (retry.cursor, retry.state_version) == (first.cursor, first.state_version) == (2, 2)
    assert store.head(run.channel_id).cursor == 3


def test_repeated_record_replays(store: actae.Store) -> None:
    run = started(store)
    first = store.record(
        run.channel_id, kind="llm", payload={"t": 5}, expected_cursor=1, operation_id="wf:llm:1"
    )

    again = store.record(
        run.channel_id, kind="llm", payload={"t": 5}, expected_cursor=1, operation_id="wf:llm:1"
    )

    assert again == actae.Receipt(
        channel_id=run.channel_id,
        cursor=first.cursor,
        state_version=1,
        operation_id="wf:llm:1",
        replayed=True,
    )
    assert store.head(run.channel_id).cursor == 2


@pytest.mark.parametrize(
    "change",
    [
        {"payload": {"t": 6}},
        {"kind": "other"},
    ],
)
def test_same_operation_with_different_content_conflicts_and_writes_nothing(
    store: actae.Store, change: dict[str, object]
) -> None:
    run = started(store)
    original = {"kind": "llm", "payload": {"t": 5}}
    store.record(run.channel_id, expected_cursor=1, operation_id="wf:llm:1", **original)  # type: ignore[arg-type]

    with pytest.raises(actae.OperationConflictError) as caught:
        store.record(
            run.channel_id,
            expected_cursor=2,
            operation_id="wf:llm:1",
            **{**original, **change},  # type: ignore[arg-type]
        )

    assert caught.value.operation_id == "wf:llm:1"
    assert caught.value.recorded_fingerprint != caught.value.presented_fingerprint
    assert store.head(run.channel_id).cursor == 2


def test_operation_id_reused_by_another_command_conflicts(store: actae.Store) -> None:
    run = started(store)
    store.record(run.channel_id, kind="k", payload={}, expected_cursor=1, operation_id="op-1")

    with pytest.raises(actae.OperationConflictError):
        store.transition(
            run.channel_id,
            kind="k",
            payload={},
            state={},
            expected_version=1,
            expected_cursor=2,
            operation_id="op-1",
        )
    with pytest.raises(actae.OperationConflictError):
        store.start_run("wf2", agent_id="a", state={}, operation_id="op-1")

    assert store.head(run.channel_id).cursor == 2


def test_same_operation_on_another_channel_conflicts(store: actae.Store) -> None:
    one = started(store)
    two = store.start_run("wf-2", agent_id="a", state={}, operation_id="start:wf-2")
    store.record(one.channel_id, kind="k", payload={}, expected_cursor=1, operation_id="op")

    with pytest.raises(actae.OperationConflictError):
        store.record(two.channel_id, kind="k", payload={}, expected_cursor=1, operation_id="op")

    assert store.head(two.channel_id).cursor == 1


def test_start_with_different_state_conflicts(store: actae.Store) -> None:
    started(store)

    with pytest.raises(actae.OperationConflictError):
        store.start_run("wf", agent_id="a", state={"n": 1}, operation_id="start:wf")


def test_commands_without_operation_id_are_not_deduplicated(store: actae.Store) -> None:
    run = started(store)
    store.record(run.channel_id, kind="k", payload={}, expected_cursor=1)

    with pytest.raises(actae.ConflictError):
        store.record(run.channel_id, kind="k", payload={}, expected_cursor=1)
