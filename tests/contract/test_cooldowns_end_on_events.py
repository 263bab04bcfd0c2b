"""Contract: an operator's action ends a worker's cooldown on the run at once (item 6).

A run that could not advance is left alone for a while (a dead worker's effect lease until
it expires, an effect needing review for a few seconds), so the worker does not spin. But
an ``override``, ``unpause``, ``approve``, ``signal`` or ``retry_run`` writes an event on
the run's channel, and the event may be what the run waited for: the next pass takes the
run at once, with no clock moving. Taking it is all the cooldown decides; the store says
whether it advances (a lease still held cools it down again, at the new head). Every
backend, the sync ``Worker`` and the ``AsyncWorker``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

import actae
from tests.async_facade import BlockingAsyncStore

LEASE = 60.0
Pass = Callable[[], int]
"""One worker pass (``run_once``); how many runs advanced."""
Passes = Callable[[actae.Registry], Pass]


@pytest.fixture(params=["sync", "async"])
def worker_on(
    request: pytest.FixtureRequest, store_url: str, clock: actae.ManualClock
) -> Iterator[tuple[Any, Passes]]:
    """A store on each backend, and a maker of a worker's passes (``Worker``, ``AsyncWorker``)."""
    if request.param == "sync":
        with actae.open(store_url, clock=clock) as store:
            yield store, lambda registry: actae.Worker(store, name="w1", registry=registry).run_once
    else:
        with BlockingAsyncStore(store_url, clock=clock) as blocking:

            def passes(registry: actae.Registry) -> Pass:
                worker = actae.AsyncWorker(blocking.async_store, name="w1", registry=registry)
                return lambda: blocking.on_loop(worker.run_once())

            yield blocking, passes


def registry(calls: list[str]) -> actae.Registry:
    workflows = actae.Registry()

    @workflows.workflow("sender")
    def send(ctx: actae.RunContext) -> dict[str, Any]:
        calls.append("send")
        return {"sent": ctx.effect("send", lambda key, token: {"sent": key})}

    @workflows.workflow("unlucky")
    def unlucky(ctx: actae.RunContext) -> dict[str, Any]:
        calls.append("unlucky")
        return {"sent": ctx.effect("send", refused, retry=actae.RetryPolicy(max_attempts=1))}

    return workflows


def refused(key: str, token: int) -> dict[str, Any]:
    raise RuntimeError("the provider said no")  # its one attempt: the effect needs review


def behind_a_dead_lease(store: Any, calls: list[str], passes: Passes) -> tuple[Any, Pass]:
    """A run cooled down until a dead worker's effect lease expires (the store's clock only)."""
    run = store.start_run("cooled", agent_id="sender", state={})
    key = f"{run.run_id}:effect:send:1"
    store.claim(key, run_id=run.run_id, worker="w3", lease=LEASE, request={"name": "send"})
    one_pass = passes(registry(calls))
    one_pass()
    one_pass()
    assert calls == ["send"]  # tried once, then left alone: the cooldown holds
    return run, one_pass


def test_override_of_an_effect_needing_review_ends_the_cooldown(
    worker_on: tuple[Any, Passes],
) -> None:
    store, passes = worker_on
    calls: list[str] = []
    run = store.start_run("review", agent_id="unlucky", state={})
    one_pass = passes(registry(calls))
    one_pass()
    key = f"{run.run_id}:effect:send:1"
    assert store.effect(key).status is actae.EffectStatus.NEEDS_REVIEW

    store.override(key, "completed", actor="ops", reason="sent by hand", result={"id": "m1"})
    one_pass()

    assert calls == ["unlucky", "unlucky"]
    done = store.run(run.run_id)
    assert (done.status, done.result) == (actae.RunStatus.COMPLETED, {"sent": {"id": "m1"}})


def test_unpause_ends_the_cooldown(worker_on: tuple[Any, Passes]) -> None:
    store, passes = worker_on
    calls: list[str] = []
    run, one_pass = behind_a_dead_lease(store, calls, passes)
    store.pause(run.run_id, actor="ops", reason="look")
    one_pass()
    assert calls == ["send"]

    store.unpause(run.run_id, actor="ops", reason="go on")
    one_pass()
    one_pass()

    assert calls == ["send", "send"]  # taken at once; the lease still held cools it again


def test_retry_run_ends_the_cooldown(worker_on: tuple[Any, Passes]) -> None:
    store, passes = worker_on
    calls: list[str] = []
    run, one_pass = behind_a_dead_lease(store, calls, passes)
    store.fail_run(run.run_id, "stuck behind w3", actor="ops")
    one_pass()

    store.retry_run(run.run_id, actor="ops", reason="w3 is back")
    one_pass()
    one_pass()

    assert calls == ["send", "send"]


@pytest.mark.parametrize(
    ("reason", "decide"),
    [
        ("approval", lambda store, run: store.approve(run.run_id, "gate", actor="alice")),
        ("signal", lambda store, run: store.signal(run.run_id, "gate", {"ok": True})),
    ],
    ids=["approve", "signal"],
)
def test_a_decision_ends_the_cooldown(
    worker_on: tuple[Any, Passes], reason: str, decide: Callable[[Any, Any], object]
) -> None:
    store, passes = worker_on
    calls: list[str] = []
    run, one_pass = behind_a_dead_lease(store, calls, passes)
    store.suspend(run.run_id, reason=reason, name="gate")  # as another worker's turn would
    one_pass()
    assert calls == ["send"]

    decide(store, run)
    one_pass()
    one_pass()

    assert calls == ["send", "send"]


def test_no_event_no_retake(worker_on: tuple[Any, Passes], clock: actae.ManualClock) -> None:
    """The cooldown still saves: without an event the run waits for the lease's expiry."""
    store, passes = worker_on
    calls: list[str] = []
    _, one_pass = behind_a_dead_lease(store, calls, passes)
    clock.advance(LEASE - 1)
    one_pass()
    assert calls == ["send"]
    clock.advance(1)
    one_pass()
    assert calls == ["send", "send"]
