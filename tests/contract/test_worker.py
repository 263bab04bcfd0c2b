"""Contract: the worker runtime drives registered workflows through waits and timers."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import actae
from actae.adapters.runtime.worker import run_until_idle

HOUR = 3600.0


def registry() -> actae.Registry:
    workflows = actae.Registry()

    @workflows.workflow("approver")
    def approve_then_sleep(ctx: actae.RunContext) -> dict[str, Any]:
        decision = ctx.wait_for_approval("manager", expires_in=24 * HOUR)
        ctx.sleep(HOUR)
        return {"approved": decision.approved}

    @workflows.workflow("buggy")
    def buggy(ctx: actae.RunContext) -> dict[str, Any]:
        ctx.step("fine", lambda: 1)
        raise RuntimeError("a bug in the workflow")

    return workflows


def test_worker_runs_a_workflow_through_approval_and_timer(
    store: actae.Store, clock: actae.ManualClock
) -> None:
    run = store.start_run("invoice-42", agent_id="approver", state={})
    other = store.start_run("not-ours", agent_id="nobody-registered", state={})
    worker = actae.Worker(store, name="w1", registry=registry())

    run_until_idle(worker)
    assert store.run(run.run_id).status is actae.RunStatus.WAITING
    clock.advance(23 * HOUR)
    store.approve(run.run_id, "manager", actor="alice")
    run_until_idle(worker)
    sleeping = store.run(run.run_id).waiting
    assert sleeping is not None
    assert (sleeping.reason, sleeping.until) == ("timer", clock() + timedelta(hours=1))
    clock.advance(HOUR)
    run_until_idle(worker)

    done = store.run(run.run_id)
    assert (done.status, done.result) == (actae.RunStatus.COMPLETED, {"approved": True})
    assert store.run(other.run_id).status is actae.RunStatus.RUNNING
    outcomes = [outcome for run_id, outcome in worker.outcomes if str(run_id) == str(run.run_id)]
    assert outcomes[0] == "waiting for approval 'manager'"
    assert outcomes[-1] == "completed"


def test_a_workflow_bug_fails_its_run_with_the_error(store: actae.Store) -> None:
    run = store.start_run("b", agent_id="buggy", state={})
    worker = actae.Worker(store, name="w1", registry=registry())

    run_until_idle(worker)

    failed = store.run(run.run_id)
    assert failed.status is actae.RunStatus.FAILED
    assert failed.error == "RuntimeError: a bug in the workflow"
