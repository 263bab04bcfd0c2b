"""Contract: what analysts read besides a run's status, on every backend.

Steps done and usage totals in run_status, the usage table and its cost_per_day view
(differences of running totals, a fork's own from zero), the audit log of operator actions,
and an effect's result summary; each the same after a rebuild as after incremental
processing, and whatever the batch size.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from datetime import UTC, date
from typing import Any

import actae
from actae.projections.tables import SUMMARY_LENGTH

LEASE = 10.0
SPEND = {"input_tokens": 100.0, "output_tokens": 20.0, "cost": 0.25}


def rows(store: actae.Store, query: str, *params: Any) -> list[dict[str, Any]]:
    """A query's rows; ``{p}`` stands for the backend's parameter mark."""
    db = store.projector().db
    statement = query.format(p=db.mark)
    return store.projector().query(statement, [db.adapt(p) for p in params])


def run_row(store: actae.Store, run: Any) -> dict[str, Any]:
    (row,) = rows(store, "SELECT * FROM run_status WHERE run_id = {p}", run.run_id)
    return row


def today(clock: actae.ManualClock) -> date:
    return clock().astimezone(UTC).date()


def day_of(value: object) -> date:
    """A cost_per_day ``day``: a date on PostgreSQL, ISO text on SQLite."""
    return value if isinstance(value, date) else date.fromisoformat(str(value))


def cost_per_day(store: actae.Store) -> dict[tuple[date, str], tuple[Any, ...]]:
    return {
        (day_of(r["day"]), r["workflow_id"]): (
            r["runs"],
            r["input_tokens"],
            r["output_tokens"],
            round(r["cost"], 9),  # a sum of floats: exact here, as binary fractions
        )
        for r in rows(store, "SELECT * FROM cost_per_day")
    }


def test_steps_and_usage_of_a_workflow_show_in_run_status_and_per_day(
    store: actae.Store, clock: actae.ManualClock
) -> None:
    workflows = actae.Registry()

    @workflows.workflow("draft")
    def draft(ctx: actae.RunContext) -> dict[str, Any]:
        outline = ctx.step("outline", lambda: "o", usage=SPEND)
        text = ctx.step("write", lambda: "w", usage=lambda value: {**SPEND, "cost": 0.5})
        ctx.record("note", {"n": 1})  # recorded, not a step
        return {"text": outline + text}

    run = store.start_run("draft", agent_id="draft", state={}, pins={"model": "m-1"})
    actae.Worker(store, name="w1", registry=workflows).run_once()
    store.projector().catch_up()

    row = run_row(store, run)
    assert (row["status"], row["steps_done"]) == ("completed", 2)
    assert (row["input_tokens"], row["output_tokens"], row["cost"]) == (200.0, 40.0, 0.75)
    assert cost_per_day(store) == {(today(clock), "draft"): (1, 200.0, 40.0, 0.75)}
    (spent,) = rows(store, "SELECT agent_id, model FROM cost_per_day")
    assert spent == {"agent_id": "draft", "model": "m-1"}


def test_steps_done_adds_up_within_one_batch_and_across_batches(
    store: actae.Store, clock: actae.ManualClock
) -> None:
    run = store.start_run("count", agent_id="a", state={})
    kinds = ["step.result", "note", "step.result", "step.result", "llm"]
    for cursor, kind in enumerate(kinds, start=1):
        store.record(run.channel_id, kind=kind, payload={}, expected_cursor=cursor)
    projector = store.projector()  # one batch holds every event

    projector.catch_up()
    whole = projector.db.snapshot()
    one_by_one = actae.Projector(
        store._service, projector.db, store._waiter, backend=store._backend, batch_size=1
    )
    one_by_one.rebuild()

    assert run_row(store, run)["steps_done"] == 3
    assert projector.db.snapshot() == whole
    store.record(run.channel_id, kind="step.result", payload={}, expected_cursor=6)
    one_by_one.catch_up()
    assert run_row(store, run)["steps_done"] == 4


def test_a_fork_spends_from_zero_and_each_day_gets_what_was_added_that_day(
    store: actae.Store, clock: actae.ManualClock
) -> None:
    parent = store.start_run("research", agent_id="a", state={}, pins={"model": "m"})
    store.record(parent.channel_id, kind="step.result", payload={}, expected_cursor=1, usage=SPEND)
    first_day = today(clock)
    fork = store.fork(parent.channel_id, at=2, reason="try again")
    clock.advance(86_400)
    child_spend = {"input_tokens": 7.0, "cost": 0.5}
    store.record(
        fork.child_channel_id, kind="step.result", payload={}, expected_cursor=1, usage=child_spend
    )
    store.record(
        parent.channel_id, kind="step.result", payload={}, expected_cursor=2, usage={"cost": 1.0}
    )
    store.record(parent.channel_id, kind="note", payload={}, expected_cursor=3)  # no usage added
    projector = store.projector()
    projector.catch_up()

    (child_row,) = rows(store, "SELECT * FROM run_status WHERE run_id = {p}", fork.child_run_id)
    assert (child_row["input_tokens"], child_row["cost"]) == (7.0, 0.5)  # not the parent's too
    assert cost_per_day(store) == {
        (first_day, "research"): (1, 100.0, 20.0, 0.25),
        (today(clock), "research"): (2, 7.0, 0.0, 1.5),
    }
    kept = rows(store, "SELECT channel_id, cursor FROM usage ORDER BY at, cursor")
    assert Counter(str(r["channel_id"]) for r in kept) == {
        str(parent.channel_id): 3,  # every event after the first usage carries the totals
        str(fork.child_channel_id): 1,  # a fork's channel opens with no usage of its own
    }
    incremental = projector.db.snapshot()
    projector.rebuild()
    assert projector.db.snapshot() == incremental


def test_usage_under_other_names_counts_for_budgets_only(store: actae.Store) -> None:
    run = store.start_run("other", agent_id="a", state={})
    usage = {"tokens": 900.0}
    store.record(run.channel_id, kind="step.result", payload={}, expected_cursor=1, usage=usage)
    store.projector().catch_up()

    row = run_row(store, run)
    assert (row["input_tokens"], row["output_tokens"], row["cost"]) == (0.0, 0.0, 0.0)
    assert rows(store, "SELECT * FROM usage") == []


def audit_log(store: actae.Store, run_id: Any) -> list[tuple[Any, ...]]:
    """What the operator's audit view lists: a run's actions, oldest first."""
    found = rows(
        store,
        "SELECT action, actor, effect_key, reason FROM audit WHERE run_id = {p} "
        "ORDER BY at, aggregate_id, version",
        run_id,
    )
    return [(r["action"], r["actor"], r["effect_key"], r["reason"]) for r in found]


def test_every_operator_action_is_in_the_audit_log(
    store: actae.Store, clock: actae.ManualClock
) -> None:
    run = store.start_run("ops", agent_id="a", state={})
    other = store.start_run("ops", agent_id="a", state={})
    store.suspend(run.run_id, reason="approval", name="manager", seconds=3600)
    store.suspend(other.run_id, reason="timer", name="timer", seconds=1)
    steps: list[Callable[[], object]] = [
        lambda: store.approve(run.run_id, "manager", actor="alice", note="looks fine"),
        lambda: store.signal(run.run_id, "nudge", {"why": "hurry"}, actor="bot"),
        lambda: store.pause(run.run_id, actor="ops", reason="look"),
        lambda: store.unpause(run.run_id, actor="ops", reason="ok"),
        lambda: store.claim("pay", run_id=run.run_id, worker="w1", lease=LEASE),
        lambda: clock.advance(LEASE),
        lambda: store.override(
            "pay", "completed", actor="bob", reason="bank says so", evidence={"ref": "tx1"}
        ),
        lambda: store.claim("mail", run_id=run.run_id, worker="w1", lease=LEASE),
        lambda: clock.advance(LEASE),
        lambda: store.reconcile("mail", "failed", actor="w2", evidence={"sent": False}),
        lambda: store.abandon("mail", actor="carol", reason="not needed"),
        lambda: store.fail_run(run.run_id, "boom", actor="w1"),
        lambda: store.retry_run(run.run_id, actor="ops", reason="fixed"),
        lambda: store.wake_due(other.run_id),  # a timer decides by itself: not audited
        lambda: store.cancel(run.run_id, actor="ops", reason="no longer wanted"),
    ]
    for step in steps:
        clock.advance(1)
        step()
    store.projector().catch_up()

    assert audit_log(store, run.run_id) == [
        ("approve", "alice", None, "looks fine"),
        ("signal", "bot", None, None),
        ("pause", "ops", None, "look"),
        ("unpause", "ops", None, "ok"),
        ("override", "bob", "pay", "bank says so"),
        ("reconcile", "w2", "mail", None),
        ("abandon", "carol", "mail", "not needed"),
        ("fail", "w1", None, "boom"),
        ("retry", "ops", None, "fixed"),
        ("cancel", "ops", None, "no longer wanted"),
    ]
    assert audit_log(store, other.run_id) == []
    details = {
        r["action"]: r["detail"] if isinstance(r["detail"], dict) else json_of(r["detail"])
        for r in rows(store, "SELECT action, detail FROM audit")
    }
    assert details["approve"] == {"name": "manager", "payload": {}, "woke": True, "noted": True}
    assert details["signal"] == {
        "name": "nudge",
        "payload": {"why": "hurry"},
        "woke": False,
        "noted": False,
    }
    assert details["unpause"] == {"resumes_to": "running"}
    assert details["override"] == {
        "outcome": "completed",
        "evidence": {"ref": "tx1", "override_reason": "bank says so"},
        "result": {"value": None},
    }
    projector = store.projector()
    incremental = projector.db.snapshot()
    projector.rebuild()
    assert projector.db.snapshot() == incremental


def json_of(text: object) -> Any:
    """A json column's value on SQLite (stored as text)."""
    return json.loads(str(text))


def test_an_effect_shows_the_start_of_its_result(
    store: actae.Store, clock: actae.ManualClock
) -> None:
    run = store.start_run("results", agent_id="a", state={})
    claim = store.claim("long", run_id=run.run_id, worker="w", lease=LEASE)
    store.complete_effect("long", token=claim.token, worker="w", result={"text": "x" * 500})
    claim = store.claim("short", run_id=run.run_id, worker="w", lease=LEASE)
    store.complete_effect("short", token=claim.token, worker="w", result={"id": "ch_1", "ok": True})
    store.claim("doubt", run_id=run.run_id, worker="w", lease=LEASE)
    clock.advance(LEASE)
    store.reconcile("doubt", "completed", actor="ops", result={"found": "tx9"})
    claim = store.claim("failing", run_id=run.run_id, worker="w", lease=LEASE)
    store.fail_effect("failing", token=claim.token, worker="w", error="503", retry_after=5)
    store.projector().catch_up()

    summaries = {
        r["effect_key"]: r["result_summary"]
        for r in rows(store, "SELECT effect_key, result_summary FROM effects")
    }
    assert summaries == {
        "long": ('{"text":"' + "x" * 500)[:SUMMARY_LENGTH],
        "short": '{"id":"ch_1","ok":true}',
        "doubt": '{"found":"tx9"}',
        "failing": None,
    }
    assert len(summaries["long"]) == SUMMARY_LENGTH
