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


def _rows(store: actae.Store) -> list[tuple[str, int]]:
    """Every stored event, of every aggregate, as (topic, version), in the store's order."""
    recorder = store._service.recorder
    return [(n.topic, n.originator_version) for n in recorder.select_notifications(1, 10_000)]


def test_a_record_and_a_transition_under_operation_ids_are_one_row_each(
    store: actae.Store,
) -> None:
    """The channel event is the command's record: no second row (docs/performance.md)."""
    run = started(store)
    before = _rows(store)

    store.record(run.channel_id, kind="k", payload={}, expected_cursor=1, operation_id="op-r")
    store.transition(
        run.channel_id,
        kind="k",
        payload={},
        state={"n": 1},
        expected_version=1,
        expected_cursor=2,
        operation_id="op-t",
    )

    written = _rows(store)[len(before) :]
    assert [topic.rsplit(".", 1)[-1] for topic, _ in written] == ["Recorded", "Transitioned"]
    assert store.operation("op-r") == actae.OperationRecord(
        operation_id="op-r", command="record", result={"cursor": 2, "state_version": 1}
    )
    assert store.operation("op-t") == actae.OperationRecord(
        operation_id="op-t", command="transition", result={"cursor": 3, "state_version": 2}
    )


def test_every_kind_of_operation_shares_one_namespace_of_ids(store: actae.Store) -> None:
    run = started(store)
    store.record(run.channel_id, kind="k", payload={}, expected_cursor=1, operation_id="op-r")
    store.claim("op-e", run_id=run.run_id, worker="w", lease=30.0, request={})

    for used in ("start:wf", "op-e"):  # a start's id, an effect's key
        with pytest.raises(actae.OperationConflictError):
            store.record(run.channel_id, kind="k", payload={}, expected_cursor=2, operation_id=used)
    with pytest.raises(actae.OperationConflictError):
        store.start_run("wf-2", agent_id="a", state={}, operation_id="op-r")
    with pytest.raises(actae.OperationConflictError):
        store.claim("op-r", run_id=run.run_id, worker="w", lease=30.0, request={})

    assert store.head(run.channel_id).cursor == 3  # the record, the claim's note
    assert store.operation("op-r") is not None
