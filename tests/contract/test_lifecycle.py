"""Contract: run lifecycle — waits, decisions, operator actions, children, versions, deadlines."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

import actae

DAY = 24 * 3600.0


def approval_workflow(ctx: actae.RunContext) -> dict[str, Any]:
    plan = ctx.step("plan", lambda: {"amount": 100})
    decision = ctx.wait_for_approval("manager", expires_in=DAY)
    return {"plan": plan, "approved": decision.approved, "by": decision.actor}


def run_until_done(store: actae.Store, run_id: Any, workflow: Any) -> dict[str, Any] | None:
    """What a worker does: run the workflow; None if it had to stop."""
    try:
        result: dict[str, Any] = workflow(store.resume(run_id, worker="w"))
    except (actae.RunSuspended, actae.RunStoppedError):
        return None
    store.complete_run(run_id, result)
    return result


def test_a_24_hour_approval_wait_completes_on_virtual_time(
    store: actae.Store, clock: actae.ManualClock
) -> None:
    run = store.start_run("invoice-42", agent_id="payer", state={})
    assert run_until_done(store, run.run_id, approval_workflow) is None
    waiting = store.run(run.run_id)
    assert waiting.status is actae.RunStatus.WAITING
    assert waiting.waiting is not None
    assert waiting.waiting.until == clock() + timedelta(seconds=DAY)

    clock.advance(DAY - 60)
    assert store.wake_due(run.run_id) is False
    store.approve(run.run_id, "manager", actor="alice", note="ok")

    assert run_until_done(store, run.run_id, approval_workflow) == {
        "plan": {"amount": 100},
        "approved": True,
        "by": "alice",
    }
    assert store.run(run.run_id).status is actae.RunStatus.COMPLETED
    kinds = [e.kind for e in store.events(run.channel_id)]
    assert kinds == ["run.started", "step.result", "run.waiting", "run.approved", "run.completed"]


def test_an_expired_approval_fails_or_escalates_as_declared(
    store: actae.Store, clock: actae.ManualClock
) -> None:
    failing = store.start_run("a", agent_id="payer", state={})
    escalating = store.start_run("b", agent_id="payer", state={})
    run_until_done(store, failing.run_id, approval_workflow)
    run_until_done(
        store,
        escalating.run_id,
        lambda ctx: ctx.wait_for_approval("cfo", expires_in=60, on_expiry="escalate"),
    )
    clock.advance(DAY + 1)

    assert store.wake_due(failing.run_id) is True
    assert store.wake_due(escalating.run_id) is True
    assert store.wake_due(escalating.run_id) is False  # escalation happens once

    failed = store.run(failing.run_id)
    assert (failed.status, failed.error) == (actae.RunStatus.FAILED, "approval 'manager' expired")
    still = store.run(escalating.run_id)
    assert still.status is actae.RunStatus.WAITING
    assert still.waiting is not None
    assert still.waiting.escalated


def test_timer_fires_exactly_once(store: actae.Store, clock: actae.ManualClock) -> None:
    run = store.start_run("t", agent_id="a", state={})

    def sleepy(ctx: actae.RunContext) -> dict[str, Any]:
        ctx.sleep(90)
        return {"woke": True}

    assert run_until_done(store, run.run_id, sleepy) is None
    clock.advance(89)
    assert store.wake_due(run.run_id) is False
    clock.advance(1)
    results: list[bool] = []
    threads = [
        threading.Thread(target=lambda: results.append(store.wake_due(run.run_id)))
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(results) == [False, False, False, True]
    assert run_until_done(store, run.run_id, sleepy) == {"woke": True}
    assert [e.kind for e in store.events(run.channel_id)].count("run.timer") == 1


def test_signals_may_arrive_before_or_during_the_wait(store: actae.Store) -> None:
    run = store.start_run("s", agent_id="a", state={})
    store.signal(run.run_id, "early", {"n": 1}, actor="webhook")

    def listener(ctx: actae.RunContext) -> dict[str, Any]:
        early = ctx.wait_for_signal("early")
        late = ctx.wait_for_signal("late")
        return {"early": early.payload, "late": late.payload}

    assert run_until_done(store, run.run_id, listener) is None
    store.signal(run.run_id, "late", {"n": 2})
    assert run_until_done(store, run.run_id, listener) == {"early": {"n": 1}, "late": {"n": 2}}
    with pytest.raises(actae.IllegalTransitionError):
        store.signal(run.run_id, "late", {"n": 3})


def test_a_wait_for_what_came_after_the_look_does_not_suspend(store: actae.Store) -> None:
    """A child that ends (or a signal that comes) between a run's look at its inbox and its
    wait tells a run that is still running: were it then to wait, nothing would wake it."""
    run = store.start_run("w", agent_id="a", state={})
    child = store.start_run("c", agent_id="a", state={}, parent_run_id=run.run_id)
    store.complete_run(child.run_id, {"done": True})  # after the parent's look, before its wait

    info = store.suspend(run.run_id, reason="child", name=f"child:{child.run_id}")

    assert info.status is actae.RunStatus.RUNNING
    assert info.waiting is None
    assert info.decisions[f"child:{child.run_id}"].payload["result"] == {"done": True}


def test_illegal_moves_name_the_current_status(store: actae.Store) -> None:
    run = store.start_run("m", agent_id="a", state={})
    store.pause(run.run_id, actor="ops", reason="investigating")

    with pytest.raises(actae.IllegalTransitionError) as caught:
        store.complete_run(run.run_id, {})
    assert caught.value.status == "paused"
    assert "paused" in str(caught.value)

    store.unpause(run.run_id, actor="ops", reason="fine")
    store.cancel(run.run_id, actor="ops", reason="customer left")
    moves: list[Callable[[], object]] = [
        lambda: store.unpause(run.run_id, actor="o", reason="r"),
        lambda: store.pause(run.run_id, actor="o", reason="r"),
        lambda: store.cancel(run.run_id, actor="o", reason="r"),
    ]
    for move in moves:
        with pytest.raises(actae.IllegalTransitionError, match="cancelled"):
            move()
    notes = [(e.kind, e.contents().get("actor")) for e in store.events(run.channel_id)][1:]
    assert notes == [("run.paused", "ops"), ("run.unpaused", "ops"), ("run.cancelled", "ops")]


def test_paused_and_cancelled_runs_stop_at_the_next_step(store: actae.Store) -> None:
    run = store.start_run("p", agent_id="a", state={})
    ctx = store.resume(run.run_id, worker="w")
    ctx.step("one", lambda: 1)
    store.pause(run.run_id, actor="ops", reason="look")

    with pytest.raises(actae.RunStoppedError, match="paused"):
        ctx.step("two", lambda: 2)
    store.unpause(run.run_id, actor="ops", reason="ok")
    assert ctx.step("two", lambda: 2) == 2


def test_cancel_during_an_effect_leaves_no_effect_unaccounted(store: actae.Store) -> None:
    run = store.start_run("c", agent_id="a", state={})
    ctx = store.resume(run.run_id, worker="w")
    entered, release = threading.Event(), threading.Event()
    outcome: list[Any] = []

    def slow_charge(key: str, token: int) -> dict[str, Any]:
        entered.set()
        assert release.wait(30)
        return {"charge_id": "ch_1"}

    def work() -> None:
        outcome.append(ctx.effect("charge", slow_charge))
        try:
            ctx.step("after", lambda: "must not run")
        except actae.RunStoppedError as stopped:
            outcome.append(stopped.status)

    worker = threading.Thread(target=work)
    worker.start()
    assert entered.wait(30)
    store.cancel(run.run_id, actor="ops", reason="stop")
    release.set()
    worker.join(30)

    assert outcome == [{"charge_id": "ch_1"}, "cancelled"]
    effect = store.effect(f"{run.run_id}:effect:charge:1")
    assert effect.status is actae.EffectStatus.COMPLETED
    assert store.recover(run.channel_id).outstanding == []
    assert "step.result" not in [e.kind for e in store.events(run.channel_id)]


def test_child_runs_report_to_their_parent_and_die_with_it(store: actae.Store) -> None:
    parent = store.start_run("p", agent_id="boss", state={})

    def delegate(ctx: actae.RunContext) -> dict[str, Any]:
        child = ctx.start_child("p-sub", agent_id="helper", state={"task": 1})
        done = ctx.wait_for_child(child)
        return {"child": done.payload}

    assert run_until_done(store, parent.run_id, delegate) is None
    child_id = store.run(parent.run_id).waiting.name.split(":", 1)[1]  # type: ignore[union-attr]
    store.complete_run(child_id, {"answer": 42})

    result = run_until_done(store, parent.run_id, delegate)
    assert result == {"child": {"status": "completed", "result": {"answer": 42}, "error": None}}
    assert store.run(child_id).parent_run_id == parent.run_id

    other = store.start_run("q", agent_id="boss", state={})
    kid = store.start_run("q-sub", agent_id="helper", state={}, parent_run_id=other.run_id)
    store.cancel(other.run_id, actor="ops", reason="abort")
    assert store.run(kid.run_id).status is actae.RunStatus.CANCELLED


def test_incompatible_resume_is_refused_and_a_migrated_one_succeeds(store: actae.Store) -> None:
    run = store.start_run(
        "v", agent_id="a", state={"amount": 100}, pins={"model": "m-1", "schema": 1}
    )

    with pytest.raises(actae.IncompatibleResumeError) as caught:
        store.resume(run.run_id, worker="w", pins={"model": "m-2"})
    assert caught.value.differences == {"model": ("m-1", "m-2")}
    with pytest.raises(actae.IncompatibleResumeError):
        store.resume(run.run_id, worker="w", pins={"model": "m-1", "schema": 2})

    ctx = store.resume(
        run.run_id,
        worker="w",
        pins={"model": "m-1", "schema": 2},
        migrations={1: lambda s: {"amount_cents": s["amount"] * 100}},
    )

    assert store.run(run.run_id).pins["schema"] == 2
    assert ctx.state() == {"amount_cents": 10000}
    last = store.events(run.channel_id)[-1]
    assert (last.kind, last.contents()["to_schema"]) == ("state.migrated", 2)


def test_a_run_past_its_deadline_stops_with_a_clear_status(
    store: actae.Store, clock: actae.ManualClock
) -> None:
    run = store.start_run("d", agent_id="a", state={}, deadline=clock() + timedelta(hours=1))
    ctx = store.resume(run.run_id, worker="w")
    ctx.step("early", lambda: 1)
    clock.advance(3601)

    with pytest.raises(actae.RunStoppedError):
        ctx.step("late", lambda: 2)
    failed = store.run(run.run_id)
    assert failed.status is actae.RunStatus.FAILED
    assert "deadline" in (failed.error or "")


def test_a_run_over_its_budget_stops_with_a_clear_status(store: actae.Store) -> None:
    run = store.start_run("b", agent_id="a", state={}, budget={"tokens": 1000, "cost": 1.0})
    ctx = store.resume(run.run_id, worker="w")
    ctx.step("think", lambda: "a", usage={"tokens": 600, "cost": 0.1})
    ctx.step("think more", lambda: "bb", usage=lambda answer: {"tokens": 300 * len(answer)})

    with pytest.raises(actae.RunStoppedError):
        ctx.step("one too many", lambda: "c")
    failed = store.run(run.run_id)
    assert failed.usage == {"tokens": 1200.0, "cost": 0.1}
    assert (failed.status, failed.error) == (
        actae.RunStatus.FAILED,
        "budget exceeded: tokens 1200 > 1000",
    )
    with pytest.raises(actae.ValidationError):
        store.start_run("x", agent_id="a", state={}, budget={"tokens": -1})


def test_a_stale_owner_cannot_write_after_another_took_over(store: actae.Store) -> None:
    run = store.start_run("o", agent_id="a", state={})
    stale = store.resume(run.run_id, worker="old")
    current = store.resume(run.run_id, worker="new")
    current.step("work", lambda: "by new")

    with pytest.raises(actae.ConflictError):
        stale.step("other work", lambda: "by old")
    assert [e.contents().get("name") for e in store.events(run.channel_id)][1:] == ["work"]


def test_lineage_lists_delegated_children(store: actae.Store) -> None:
    parent = store.start_run("p", agent_id="a", state={})
    kids = [
        store.start_run(f"k{i}", agent_id="a", state={}, parent_run_id=parent.run_id)
        for i in range(2)
    ]

    assert store.lineage(parent.run_id).children == [k.run_id for k in kids]
    assert store.run(kids[0].run_id).parent_run_id == parent.run_id


def test_timers_survive_a_restart(durable_url: str) -> None:
    clock = actae.ManualClock()
    with actae.open(durable_url, clock=clock) as store:
        run = store.start_run("t", agent_id="a", state={})
        with pytest.raises(actae.RunSuspended):
            store.resume(run.run_id, worker="w").sleep(600)

    clock.advance(600)
    with actae.open(durable_url, clock=clock) as reopened:
        assert reopened.wake_due(run.run_id) is True
        assert reopened.run(run.run_id).status is actae.RunStatus.RUNNING
        reopened.resume(run.run_id, worker="w").sleep(600)  # returns: the timer fired


def test_an_operator_override_settles_an_effect_in_doubt(
    store: actae.Store, clock: actae.ManualClock
) -> None:
    run = store.start_run("o", agent_id="a", state={})
    store.claim("pay", run_id=run.run_id, worker="dead", lease=30)
    clock.advance(31)

    info = store.override(
        "pay",
        "completed",
        actor="ops",
        reason="bank statement shows it",
        evidence={"statement": "line 7"},
        result={"charge_id": "ch_9"},
    )

    assert info.status is actae.EffectStatus.COMPLETED
    note = store.events(run.channel_id)[-1]
    assert (note.kind, note.contents()["actor"]) == ("effect.reconciled", "ops")
    assert note.contents()["evidence"]["override_reason"] == "bank statement shows it"
