"""Contract: read models built by the projector (every backend)."""

from __future__ import annotations

import io
import time
import uuid
from datetime import datetime, timedelta
from typing import Any

import pytest
from eventsourcing.persistence import ApplicationRecorder, StoredEvent

import actae
from actae.adapters.operate import views
from actae.adapters.persistence.codec import stamped
from actae.adapters.readside import projector as projector_module
from actae.adapters.readside.readmodels import Batch
from actae.projections.changes import Upsert
from actae.projections.project import project
from actae.projections.tables import RUN_STATUS

TIMEOUT = 30


def scenario(store: actae.Store, clock: actae.ManualClock) -> dict[str, Any]:
    """Runs in every state the views know: running, retrying, blocked, forked."""
    running = store.start_run("billing", agent_id="a", state={}, pins={"model": "m-1"})
    store.record(running.channel_id, kind="llm", payload={}, expected_cursor=1)
    fork = store.fork(running.channel_id, at=2, reason="cheaper", pins={"model": "m-2"})
    retrying = store.start_run("billing", agent_id="a", state={})
    blocked = store.start_run("refunds", agent_id="a", state={})
    policy = {"max_attempts": 1, "initial_delay": 1.0}
    claim = store.claim("retry-me", run_id=retrying.run_id, worker="w", lease=10)
    store.fail_effect("retry-me", token=claim.token, worker="w", error="429", retry_after=30)
    claim = store.claim("review-me", run_id=blocked.run_id, worker="w", lease=10, retry=policy)
    store.fail_effect("review-me", token=claim.token, worker="w", error="card declined")
    claim = store.claim("done", run_id=running.run_id, worker="w", lease=10)
    store.complete_effect("done", token=claim.token, worker="w", result={"ok": True})
    return {"running": running, "retrying": retrying, "blocked": blocked, "fork": fork}


def moment(value: object) -> datetime:
    """A projected timestamp: a datetime on PostgreSQL, ISO 8601 text on SQLite."""
    assert isinstance(value, datetime | str), value
    return datetime.fromisoformat(value) if isinstance(value, str) else value


def rows_by_run(projector: actae.Projector) -> dict[str, dict[str, Any]]:
    return {str(row["run_id"]): row for row in projector.query("SELECT * FROM run_status")}


def test_run_status_lineage_and_outstanding_effects(
    store: actae.Store, clock: actae.ManualClock
) -> None:
    runs = scenario(store, clock)
    projector = store.projector()

    projector.catch_up()

    rows = rows_by_run(projector)
    running = rows[str(runs["running"].run_id)]
    assert (running["status"], running["next_action"], running["attempts"]) == (
        "running",
        "continue",
        1,
    )
    assert running["head_cursor"] == store.head(runs["running"].channel_id).cursor
    assert running["model"] == "m-1"
    retrying = rows[str(runs["retrying"].run_id)]
    assert (retrying["status"], retrying["next_action"]) == ("retrying", "retry effect retry-me")
    assert moment(retrying["next_retry_at"]) == clock() + timedelta(seconds=30)  # Retry-After
    blocked = rows[str(runs["blocked"].run_id)]
    assert (blocked["status"], blocked["next_action"]) == ("blocked", "review effect review-me")
    child = rows[str(runs["fork"].child_run_id)]
    assert (child["model"], str(child["forked_from_run_id"])) == (
        "m-2",
        str(runs["running"].run_id),
    )
    (edge,) = projector.query("SELECT * FROM lineage")
    assert (edge["relation"], edge["requested_boundary"], edge["resolved_boundary"]) == (
        "fork",
        2,
        1,
    )
    outstanding = {
        r["effect_key"]: r["status"] for r in projector.query("SELECT * FROM outstanding_effects")
    }
    assert outstanding == {"retry-me": "retry_scheduled", "review-me": "needs_review"}
    assert projector.errors() == []


def test_processing_again_changes_nothing(store: actae.Store, clock: actae.ManualClock) -> None:
    scenario(store, clock)
    projector = store.projector()
    projector.catch_up()
    before = projector.db.snapshot()

    assert projector.catch_up() == 0
    assert projector.process_batch() == 0
    assert projector.db.snapshot() == before


def test_rebuild_equals_incremental(store: actae.Store, clock: actae.ManualClock) -> None:
    projector = store.projector(batch_size=3)
    runs = scenario(store, clock)
    projector.catch_up()
    usage = {"input_tokens": 40.0, "output_tokens": 8.0, "cost": 0.1}
    retrying = runs["retrying"]
    store.record(
        retrying.channel_id, kind="step.result", payload={}, expected_cursor=3, usage=usage
    )
    store.pause(runs["blocked"].run_id, actor="ops", reason="look first")
    clock.advance(60)
    claim = store.claim("retry-me", run_id=retrying.run_id, worker="w2", lease=10)
    store.complete_effect("retry-me", token=claim.token, worker="w2", result={"ok": True})
    store.abandon("review-me", actor="ops", reason="refunded by hand")
    projector.catch_up()
    incremental = projector.db.snapshot()

    projector.rebuild()

    assert projector.db.snapshot() == incremental
    assert all(incremental.values()), "every table has rows to compare"
    projector.rebuild()  # again, nothing new: the database says where the rebuild starts
    assert projector.db.snapshot() == incremental
    assert projector.position() == store._service.recorder.max_notification_id()
    row = rows_by_run(projector)[str(retrying.run_id)]
    assert (row["status"], row["steps_done"], row["input_tokens"], row["cost"]) == (
        "running",
        1,
        40.0,
        0.1,
    )


def test_poison_event_is_recorded_and_skipped(store: actae.Store, clock: actae.ManualClock) -> None:
    store.start_run("before", agent_id="a", state={})
    recorder = store._service.recorder
    assert isinstance(recorder, ApplicationRecorder)
    originator = uuid.uuid4()
    recorder.insert_events(
        [
            StoredEvent(
                originator_id=originator,
                originator_version=1,
                topic="Channel.Recorded",
                state=stamped("Channel.Recorded", originator, 1, b"{not json}"),
            )
        ]
    )
    after = store.start_run("after", agent_id="a", state={})
    projector = store.projector()

    projector.catch_up()

    (error,) = projector.errors()
    assert error["topic"] == "Channel.Recorded"
    assert error["error"].startswith("CorruptionError: stored event of channel ")
    assert "at cursor 1: its body is not JSON" in error["error"]
    assert str(after.run_id) in rows_by_run(projector)
    assert projector.position() == recorder.max_notification_id()


def test_an_event_whose_changes_fail_is_recorded_and_the_rest_of_its_batch_applied(
    store: actae.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = store.start_run("before", agent_id="a", state={})
    refused = store.start_run("refused", agent_id="a", state={})
    after = store.start_run("after", agent_id="a", state={})
    projector = store.projector()
    write = projector.db.write

    def refusing(batch: Batch, suffix: str = "") -> None:
        if any(key == refused.run_id for _, key in batch.rows):
            raise ValueError("refused by the read models")
        write(batch, suffix)

    monkeypatch.setattr(projector.db, "write", refusing)

    projector.catch_up()

    errors = projector.errors()
    assert errors, "the refused run's events are kept as poison events"
    assert all(e["error"] == "ValueError: refused by the read models" for e in errors)
    rows = rows_by_run(projector)
    assert str(before.run_id) in rows
    assert str(after.run_id) in rows
    assert str(refused.run_id) not in rows
    assert projector.position() == store._service.recorder.max_notification_id()


def test_an_event_the_merge_refuses_commits_none_of_its_changes(
    store: actae.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An event's changes reach the merged batch all together, after all were computed.

    A change the merge cannot take is a fault of the projections, not a poison event: the
    projector stops with nothing of the batch written, never with half of the event in it.
    """
    refused = store.start_run("refused", agent_id="a", state={})
    projector = store.projector()

    def with_a_change_the_merge_refuses(event: Any) -> list[Any]:
        changes = project(event)
        if getattr(event, "originator_id", None) == refused.run_id:
            return [*changes, Upsert(RUN_STATUS, ["a list is no key"], {})]
        return changes

    monkeypatch.setattr(projector_module, "project", with_a_change_the_merge_refuses)

    with pytest.raises(TypeError, match="unhashable"):
        projector.catch_up()
    assert projector.position() == 0
    assert projector.errors() == []
    assert str(refused.run_id) not in rows_by_run(projector)


def test_live_projector_follows_new_events(store: actae.Store) -> None:
    projector = store.projector().start()
    run = store.start_run("live", agent_id="a", state={})
    store.record(run.channel_id, kind="k", payload={}, expected_cursor=1)
    target = store._service.recorder.max_notification_id()

    deadline = time.monotonic() + TIMEOUT
    while projector.position() != target and time.monotonic() < deadline:
        time.sleep(0.01)  # polling a condition (the tracked position) with a deadline
    projector.stop()

    assert rows_by_run(projector)[str(run.run_id)]["head_cursor"] == 2


def test_catching_up_a_large_backlog_shows_progress(store: actae.Store) -> None:
    run = store.start_run("busy", agent_id="a", state={})
    for n in range(1, 120):
        store.record(run.channel_id, kind="k", payload={}, expected_cursor=n)
    out = io.StringIO()
    projector = actae.Projector(
        store._service,
        store.projector().db,
        store._waiter,
        backend=store._backend,
        batch_size=10,
        out=out,
    )

    assert projector.catch_up() >= 120

    assert "projected 120/" in out.getvalue()


def test_run_status_follows_the_lifecycle(store: actae.Store, clock: actae.ManualClock) -> None:
    projector = store.projector()
    waiting = store.start_run("w", agent_id="a", state={})
    paused = store.start_run("p", agent_id="a", state={})
    done = store.start_run("d", agent_id="a", state={})
    store.suspend(waiting.run_id, reason="approval", name="manager", seconds=60)
    store.pause(paused.run_id, actor="ops", reason="look")
    store.complete_run(done.run_id, {"ok": True})
    projector.catch_up()

    rows = rows_by_run(projector)
    assert (rows[str(waiting.run_id)]["status"], rows[str(waiting.run_id)]["next_action"]) == (
        "waiting",
        "wait for approval manager",
    )
    assert moment(rows[str(waiting.run_id)]["wake_at"]) == clock() + timedelta(seconds=60)
    assert (rows[str(paused.run_id)]["status"], rows[str(paused.run_id)]["next_action"]) == (
        "paused",
        "unpause",
    )
    assert rows[str(done.run_id)]["status"] == "completed"

    store.approve(waiting.run_id, "manager", actor="alice")
    store.unpause(paused.run_id, actor="ops", reason="ok")
    projector.catch_up()
    rows = rows_by_run(projector)
    assert [rows[str(r.run_id)]["status"] for r in (waiting, paused)] == ["running", "running"]
    assert rows[str(waiting.run_id)]["waiting_name"] is None


def test_a_run_the_projector_has_not_seen_stands_as_the_rule_says_on_the_stores_view(
    store: actae.Store,
) -> None:
    """An operator's view of a run with no run_status row yet applies the same rule."""
    waiting = store.start_run("billing", agent_id="a", state={})
    store.suspend(waiting.run_id, reason="approval", name="refund")
    failed = store.start_run("billing", agent_id="a", state={})
    store.fail_run(failed.run_id, "ValueError: no", actor="w")

    shown = [views.run_view(store, run.run_id) for run in (waiting, failed)]

    assert [view.row for view in shown] == [None, None]  # nothing caught up
    assert [(view.status, view.lifecycle, view.next_action) for view in shown] == [
        ("waiting", "waiting", "wait for approval refund"),
        ("failed", "failed", "fix and retry: ValueError: no"),
    ]
