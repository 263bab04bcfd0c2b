"""Contract: a store that lost committed events is never written past (issue 28, item 1).

After a failover to a standby that was behind, the newest rows of a channel are gone while
a process still remembers them. The database itself refuses a write whose previous cursor
it does not hold (whatever the process guesses), and the process that finds the store
behind what it saw raises ``HistoryRegressedError``, logs it at ERROR and writes nothing
more. Rows are deleted behind the store's back (``tests/history_loss.py``).
"""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest
from eventsourcing.persistence import IntegrityError, StoredEvent

import actae
from actae.domain.operation import Operation
from tests.history_loss import lose_events_after

KEY = "invoice-42:charge"
WATCHDOG = 30.0
"""Seconds after which a worker that did not stop on its own is stopped (and the test fails)."""


def stored_versions(store: actae.Store, aggregate_id: object) -> list[int]:
    """The versions the database holds, read past every memory of the process."""
    rows = store._service.recorder.select_events(aggregate_id)  # type: ignore[arg-type]
    return [row.originator_version for row in rows]


def ten_cursors(store: actae.Store) -> actae.RunInfo:
    run = store.start_run("regressed", agent_id="a", state={})
    for cursor in range(1, 10):
        store.record(run.channel_id, kind="step", payload={"n": cursor}, expected_cursor=cursor)
    assert stored_versions(store, run.channel_id) == list(range(1, 11))
    return run


def test_a_channel_that_lost_its_last_rows_is_not_written_past(
    store: actae.Store, store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Cursors 1-10, rows 6-10 lost: the same process's write at 10 is refused, loudly."""
    run = ten_cursors(store)
    assert lose_events_after(store, store_url, run.channel_id, 5) == 5

    refused = pytest.raises(actae.HistoryRegressedError)
    with caplog.at_level(logging.ERROR, logger="actae.store"), refused as caught:
        store.record(run.channel_id, kind="step", payload={"n": 10}, expected_cursor=10)
    regressed = caught.value
    assert (regressed.channel, regressed.seen, regressed.found) == (run.channel_id, 10, 5)
    assert isinstance(regressed, actae.CorruptionError)
    assert "history regressed" in str(regressed)
    assert stored_versions(store, run.channel_id) == [1, 2, 3, 4, 5]
    errors = [r for r in caplog.records if r.levelno == logging.ERROR and r.name == "actae.store"]
    assert len(errors) == 1
    assert "history regressed" in errors[0].getMessage()

    other = store._service.recorder.max_notification_id()
    with pytest.raises(actae.HistoryRegressedError):  # it takes no new work at all
        store.start_run("another", agent_id="a", state={})
    with pytest.raises(actae.HistoryRegressedError):
        store.head(run.channel_id)
    assert store._service.recorder.max_notification_id() == other
    assert stored_versions(store, run.channel_id) == [1, 2, 3, 4, 5]


def test_a_fresh_process_writes_on_from_what_the_store_holds(store_url: str) -> None:
    """Another process, which never saw cursors 6-10, continues at cursor 6."""
    if store_url.startswith("memory"):
        pytest.skip("a memory store lives and dies with its one process")
    with actae.open(store_url) as first:
        run = ten_cursors(first)
        lose_events_after(first, store_url, run.channel_id, 5)
        with pytest.raises(actae.HistoryRegressedError):
            first.record(run.channel_id, kind="step", payload={}, expected_cursor=10)
    with actae.open(store_url) as fresh:
        receipt = fresh.record(run.channel_id, kind="step", payload={}, expected_cursor=5)
        assert receipt.cursor == 6
        assert stored_versions(fresh, run.channel_id) == [1, 2, 3, 4, 5, 6]


def test_the_database_refuses_a_gap_whatever_the_process_remembers(
    store: actae.Store, store_url: str
) -> None:
    """With the process's floor forgotten, its stale head guess still writes nothing."""
    run = ten_cursors(store)
    lose_events_after(store, store_url, run.channel_id, 5)
    store._service.core.seen.__init__()  # type: ignore[misc]  # as if it never saw 6-10
    assert store._service.core.heads.get(run.channel_id) is not None  # the guess says 10

    with pytest.raises(actae.ConflictError) as caught:
        store.record(run.channel_id, kind="step", payload={}, expected_cursor=10)
    assert caught.value.actual_cursor == 5
    assert stored_versions(store, run.channel_id) == [1, 2, 3, 4, 5]


def test_the_recorder_refuses_a_version_whose_predecessor_is_missing(
    store: actae.Store, store_url: str
) -> None:
    """Straight at the recorder: version 12 after 10 is refused, 11 and 11-12 are written."""
    run = ten_cursors(store)
    recorder = store._service.recorder
    (head,) = recorder.select_events(run.channel_id, desc=True, limit=1)

    def at(version: int) -> StoredEvent:
        return StoredEvent(head.originator_id, version, head.topic, head.state)

    for orphaned in ([at(12)], [at(12), at(13)], [at(11), at(13)]):
        with pytest.raises(IntegrityError, match="holds no version"):
            recorder.insert_events(orphaned)
        assert stored_versions(store, run.channel_id) == list(range(1, 11))
    recorder.insert_events([at(11), at(12)])  # a predecessor in the same write counts
    assert stored_versions(store, run.channel_id) == list(range(1, 13))


def test_a_fencing_token_below_the_one_granted_stops_the_process(durable_url: str) -> None:
    """Token 2 was granted here; the store lost it and another process took token 1 since."""
    url = durable_url
    clock = actae.ManualClock()
    with actae.open(url, clock=clock) as here, actae.open(url, clock=clock) as there:
        run = here.start_run("invoice-42", agent_id="payer", state={})
        assert here.claim(KEY, run_id=run.run_id, worker="w1", lease=30.0).token == 1
        clock.advance(31)
        assert here.claim(KEY, run_id=run.run_id, worker="w2", lease=30.0).token == 2
        effect_id = Operation.id_for(KEY)
        lose_events_after(here, url, effect_id, 1)  # both claims gone: registered only
        lose_events_after(here, url, run.channel_id, 1)

        taken = there.claim(KEY, run_id=run.run_id, worker="w3", lease=30.0)
        assert taken.token == 1  # the other process cannot know: the store says so
        for _ in range(3):
            there.heartbeat(KEY, token=1, worker="w3", lease=30.0)
        assert len(stored_versions(here, effect_id)) > 3  # past what "here" saw, by version

        with pytest.raises(actae.HistoryRegressedError) as caught:
            here.effect(KEY)
        assert (caught.value.channel, caught.value.seen, caught.value.found) == (
            run.channel_id,
            2,
            1,
        )
        with pytest.raises(actae.HistoryRegressedError):
            here.complete_effect(KEY, token=2, worker="w2", result={"charge_id": "ch_2"})


def test_a_worker_that_meets_a_regressed_history_stops_and_says_so(
    store: actae.Store, store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Step a is recorded, then lost while step b runs: the worker stops, run_status says why."""
    workflows = actae.Registry()

    @workflows.workflow("lossy")
    def lossy(ctx: actae.RunContext) -> None:
        ctx.step("a", lambda: 1)
        ctx.step("b", lambda: lose_events_after(store, store_url, ctx.run.channel_id, 1))

    run = store.start_run("lossy", agent_id="lossy", state={})
    worker = actae.Worker(store, name="w1", registry=workflows, retention_every=None)
    watchdog = threading.Timer(WATCHDOG, worker.request_stop)  # a worker that goes on
    watchdog.start()
    try:
        with caplog.at_level(logging.ERROR), pytest.raises(actae.HistoryRegressedError) as caught:
            worker.run()
    finally:
        watchdog.cancel()
    assert (caught.value.channel, caught.value.found) == (run.channel_id, 1)
    assert worker.outcomes == []  # stopped inside the run, not after it as an outcome
    assert stored_versions(store, run.channel_id) == [1]
    said = [r.getMessage() for r in caplog.records if r.name == "actae.worker"]
    assert any("stopping: " in line and "history regressed" in line for line in said), said
    rows = store.projector().query("SELECT run_id, next_action FROM run_status")
    (action,) = [row["next_action"] for row in rows if str(row["run_id"]) == str(run.run_id)]
    assert action.startswith("history regressed: "), action


async def test_an_async_worker_that_meets_a_regressed_history_stops(store_url: str) -> None:
    """``AsyncWorker.run`` raises the error, as ``Worker.run`` does, and run_status says why."""
    workflows = actae.Registry()
    async with actae.open_async(store_url) as store:

        @workflows.workflow("lossy")
        async def lossy(ctx: actae.AsyncRunContext) -> None:
            await ctx.step("a", lambda: 1)
            lose = lambda: lose_events_after(store.sync, store_url, ctx.run.channel_id, 1)  # noqa: E731
            await ctx.step("b", lose)

        run = await store.start_run("lossy", agent_id="lossy", state={})
        worker = actae.AsyncWorker(store, name="w1", registry=workflows, retention_every=None)
        with pytest.raises(actae.HistoryRegressedError) as caught:
            await asyncio.wait_for(worker.run(), WATCHDOG)
        assert (caught.value.channel, caught.value.found) == (run.channel_id, 1)
        rows = store.sync.projector().query("SELECT run_id, next_action FROM run_status")
        (action,) = [row["next_action"] for row in rows if str(row["run_id"]) == str(run.run_id)]
        assert action.startswith("history regressed: "), action
