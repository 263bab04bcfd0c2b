"""Contract: a worker neither spins on a run that cannot advance nor stays silent about it.

Every backend, on the manual clock: a run behind a dead worker's effect lease is tried once
and then left alone until the lease expires on the store's clock; a run whose agent has no
workflow in any live worker is logged once and named in run_status; a ValidationError
raised from workflow code fails the run once instead of being retried forever.
"""

from __future__ import annotations

import io
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

import actae
from actae.adapters.runtime.worker import run_until_idle

LEASE = 60.0
REQUEST = {"name": "send"}  # what ctx.effect("send", ...) claims with


def effect_key(run: actae.RunInfo, name: str) -> str:
    """The key ``ctx.effect(name, ...)`` uses for the first effect of that name."""
    return f"{run.run_id}:effect:{name}:1"


def counting_registry(calls: list[str]) -> actae.Registry:
    workflows = actae.Registry()

    @workflows.workflow("sender")
    def send(ctx: actae.RunContext) -> dict[str, Any]:
        calls.append("send")
        sent = ctx.effect("send", lambda key, token: {"sent": key}, reconcile=lambda key: None)
        return {"sent": sent}

    @workflows.workflow("bad-input")
    def bad_input(ctx: actae.RunContext) -> dict[str, Any]:
        calls.append("bad-input")
        raise actae.ValidationError("draft", "result is not plain JSON: datetime")

    @workflows.workflow("failed-by-step")
    def failed_by_step(ctx: actae.RunContext) -> dict[str, Any]:
        calls.append("failed-by-step")
        ctx.step("draft", lambda: datetime(2026, 11, 30, tzinfo=UTC))  # not plain JSON
        return {}

    return workflows


def run_status(store: actae.Store, run: actae.RunInfo) -> dict[str, Any]:
    projector = store.projector()
    projector.catch_up()
    (row,) = [
        r
        for r in projector.query("SELECT * FROM run_status")
        if str(r["run_id"]) == str(run.run_id)
    ]
    return row


def test_a_run_behind_a_dead_workers_effect_lease_waits_for_its_expiry(
    store: actae.Store, clock: actae.ManualClock
) -> None:
    run = store.start_run("mail-1", agent_id="sender", state={})
    dead = store.claim(
        effect_key(run, "send"), run_id=run.run_id, worker="w3", lease=LEASE, request=REQUEST
    )
    assert dead.status == "granted"  # w3 was SIGKILLed holding this lease
    calls: list[str] = []
    worker = actae.Worker(store, name="w1", registry=counting_registry(calls))

    passes = [worker.run_once() for _ in range(5)]
    clock.advance(LEASE - 1)
    passes += [worker.run_once() for _ in range(5)]

    assert calls == ["send"]  # tried once, then left alone until the lease expires
    assert passes == [0] * 10  # nothing advanced, so `actae worker` sleeps between passes
    clock.advance(1)
    worker.run_once()
    assert calls == ["send", "send"]
    done = store.run(run.run_id)
    assert (done.status, done.result) == (
        actae.RunStatus.COMPLETED,
        {"sent": {"sent": effect_key(run, "send")}},
    )


def test_a_run_retried_later_is_not_taken_before_its_retry_time(
    store: actae.Store, clock: actae.ManualClock
) -> None:
    run = store.start_run("mail-2", agent_id="sender", state={})
    claim = store.claim(
        effect_key(run, "send"), run_id=run.run_id, worker="w3", lease=LEASE, request=REQUEST
    )
    store.fail_effect(
        effect_key(run, "send"), token=claim.token, worker="w3", error="429", retry_after=30
    )
    calls: list[str] = []
    worker = actae.Worker(store, name="w1", registry=counting_registry(calls))

    for _ in range(3):
        worker.run_once()
    clock.advance(29)
    for _ in range(3):
        worker.run_once()

    assert calls == []
    clock.advance(1)
    worker.run_once()
    assert calls == ["send"]
    assert store.run(run.run_id).status is actae.RunStatus.COMPLETED


def test_an_unserved_run_is_logged_once_and_run_status_names_the_missing_workflow(
    store: actae.Store,
) -> None:
    run = store.start_run("orphan", agent_id="nobody-registered", state={})
    out = io.StringIO()
    worker = actae.Worker(store, name="w1", registry=actae.Registry(), out=out)
    before = store.events(run.channel_id)

    for _ in range(5):
        worker.run_once()

    lines = out.getvalue().splitlines()
    assert len(lines) == 1
    assert "no live worker has a workflow for agent 'nobody-registered'" in lines[0]
    assert store.events(run.channel_id) == before  # nothing written on the run's channel
    row = run_status(store, run)
    assert (row["status"], row["next_action"]) == (
        "running",
        "register workflow 'nobody-registered'",
    )


def test_a_run_another_live_worker_serves_is_not_unserved(
    store: actae.Store, clock: actae.ManualClock
) -> None:
    """A fleet may split its agents: a worker lacking a workflow says nothing while another
    live worker has it, and speaks up once that worker's advertisement runs out."""
    run = store.start_run("split", agent_id="sender", state={})
    holder = actae.Worker(store, name="w2", registry=counting_registry([]), lease=LEASE)
    holder._advertise(store.now())  # alive, but has not taken the run yet
    out = io.StringIO()
    other = actae.Worker(store, name="w1", registry=actae.Registry(), lease=LEASE, out=out)

    other.run_once()
    assert run_status(store, run)["next_action"] == "continue"
    assert out.getvalue() == ""

    clock.advance(LEASE)  # w2's advertisement runs out: it died
    other.run_once()
    assert run_status(store, run)["next_action"] == "register workflow 'sender'"


def test_a_served_run_no_longer_asks_for_its_workflow(store: actae.Store) -> None:
    run = store.start_run("late", agent_id="sender", state={})
    actae.Worker(store, name="w1", registry=actae.Registry()).run_once()
    assert run_status(store, run)["next_action"] == "register workflow 'sender'"

    actae.Worker(store, name="w2", registry=counting_registry([])).run_once()

    row = run_status(store, run)
    assert (row["status"], row["next_action"]) == ("completed", "none")


def test_a_validation_error_from_workflow_code_fails_the_run_once(store: actae.Store) -> None:
    raised = store.start_run("v1", agent_id="bad-input", state={})
    failed = store.start_run("v2", agent_id="failed-by-step", state={})
    calls: list[str] = []
    out = io.StringIO()
    worker = actae.Worker(store, name="w1", registry=counting_registry(calls), out=out)

    for _ in range(3):
        worker.run_once()

    assert sorted(calls) == ["bad-input", "failed-by-step"]
    assert len(out.getvalue().splitlines()) == 2
    info = store.run(raised.run_id)
    assert info.status is actae.RunStatus.FAILED
    assert info.error == "ValidationError: invalid draft: result is not plain JSON: datetime"
    step_error = store.run(failed.run_id).error
    assert step_error is not None
    assert step_error.startswith("step 'draft': its result cannot be recorded: ")
    assert "not plain JSON" in step_error
    row = run_status(store, raised)
    assert (row["status"], row["error"], row["next_action"]) == (
        "failed",
        info.error,
        f"fix and retry: {info.error}",
    )
    assert run_status(store, failed)["next_action"] == f"fix and retry: {step_error}"


def test_a_run_stuck_for_one_reason_is_logged_once(
    store: actae.Store, clock: actae.ManualClock
) -> None:
    """A fork waiting on its parent's unfinished effect is tried now and then, said once."""
    parent = store.start_run("mail-9", agent_id="sender", state={})
    store.claim(
        effect_key(parent, "send"), run_id=parent.run_id, worker="w3", lease=LEASE, request=REQUEST
    )
    fork = store.fork(parent.channel_id, at=store.head(parent.channel_id).cursor)
    calls: list[str] = []
    out = io.StringIO()
    worker = actae.Worker(store, name="w1", registry=counting_registry(calls), out=out)

    for _ in range(4):
        worker.run_once()
        clock.advance(10)  # past the short cooldown, within the parent's lease

    about_fork = [line for line in out.getvalue().splitlines() if str(fork.child_run_id) in line]
    assert len(about_fork) == 1
    assert f"blocked: effect {effect_key(parent, 'send')} is claimed" in about_fork[0]
    assert calls.count("send") >= 3  # tried again each time its cooldown ended


def test_a_worker_with_invalid_pins_fails_no_run(store: actae.Store) -> None:
    """A resume refused because of the worker's own configuration is not the run's fault."""
    run = store.start_run("pinned", agent_id="typo", state={})
    workflows = actae.Registry()

    @workflows.workflow("typo", pins={"modle": "m-1"})
    def typo(ctx: actae.RunContext) -> dict[str, Any]:
        return {}

    out = io.StringIO()
    actae.Worker(store, name="w1", registry=workflows, out=out).run_once()

    assert store.run(run.run_id).status is actae.RunStatus.RUNNING
    assert "invalid pins" in out.getvalue()


def test_a_workflow_may_return_any_json_value(store: actae.Store) -> None:
    workflows = actae.Registry()
    returned: dict[str, object] = {"text": "fine", "zero": 0, "pairs": [["a", 1]], "none": None}
    for agent, value in returned.items():

        @workflows.workflow(agent)
        def give(ctx: actae.RunContext, value: object = value) -> object:
            return value

    runs = {agent: store.start_run(f"ret-{agent}", agent_id=agent, state={}) for agent in returned}
    actae.Worker(store, name="w1", registry=workflows).run_once()

    results = {agent: store.run(run.run_id) for agent, run in runs.items()}
    assert all(r.status is actae.RunStatus.COMPLETED for r in results.values())
    assert {agent: r.result for agent, r in results.items()} == {
        "text": {"value": "fine"},
        "zero": {"value": 0},
        "pairs": {"value": [["a", 1]]},
        "none": {},
    }


@pytest.mark.parametrize(
    "error",
    [
        ConnectionRefusedError(111, "Connection refused"),  # a model provider is down
        psycopg.errors.DeadlockDetected("deadlock detected"),  # in the workflow's own database
    ],
    ids=["provider-refused", "own-database-deadlock"],
)
def test_an_outage_of_something_a_workflow_uses_fails_its_run_not_the_worker(
    store: actae.Store, error: Exception
) -> None:
    """Only the store's own outages are waited out; the rest is the run's error."""
    workflows = actae.Registry()

    @workflows.workflow("calls-out")
    def calls_out(ctx: actae.RunContext) -> None:
        ctx.step("a", lambda: 1)
        raise error

    @workflows.workflow("fine")
    def fine(ctx: actae.RunContext) -> dict[str, Any]:
        return {"ok": ctx.step("b", lambda: True)}

    failing = store.start_run("r1", agent_id="calls-out", state={})
    other = store.start_run("r2", agent_id="fine", state={})
    worker = actae.Worker(store, name="w1", registry=workflows)

    run_until_idle(worker)
    failed = store.run(failing.run_id)
    assert failed.status is actae.RunStatus.FAILED
    assert type(error).__name__ in (failed.error or "")
    assert store.run(other.run_id).status is actae.RunStatus.COMPLETED
