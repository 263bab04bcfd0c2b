"""Contract: a step or an effect that finishes after a pause or a cancel keeps its result.

The operator acts while the step's function runs (here from inside it, as another process
would at that moment). What the function returned was paid for: it is recorded, with its
usage, and the run stops at the next boundary. After ``unpause`` the workflow replays the
recorded result and the function is not called again; after ``cancel`` the result and its
usage stay in the run's history. Every backend, through the sync and the async face.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import actae

USAGE = {"input_tokens": 700.0, "output_tokens": 112.0, "cost": 0.02}
STOPS = {"pause": "paused", "cancel": "cancelled"}


def stopper(store: actae.Store, run: actae.RunInfo, action: str) -> Callable[[], None]:
    """The operator's action on ``run`` (``pause`` or ``cancel``)."""
    return lambda: getattr(store, action)(run.run_id, actor="ops", reason="look")


def sampled(calls: list[str], stop: Callable[[], None]) -> Callable[[], dict[str, Any]]:
    """A model call during which the operator stops the run, the first time only."""

    def sample() -> dict[str, Any]:
        calls.append("sample")
        if len(calls) == 1:
            stop()
        return {"text": "a sampled answer"}

    return sample


@pytest.mark.parametrize("action", sorted(STOPS))
def test_a_step_that_finishes_after_a_stop_is_recorded_with_its_usage(
    store: actae.Store, action: str
) -> None:
    run = store.start_run(f"mid-step-{action}", agent_id="a", state={})
    calls: list[str] = []
    ctx = store.resume(run.run_id, worker="w")

    answer = ctx.step("sample", sampled(calls, stopper(store, run, action)), usage=USAGE)

    assert answer == {"text": "a sampled answer"}
    with pytest.raises(actae.RunStoppedError, match=STOPS[action]):
        ctx.step("next", lambda: "must not run")
    kinds = [e.kind for e in store.events(run.channel_id)]
    assert kinds == ["run.started", f"run.{STOPS[action]}", "step.result"]
    assert store.run(run.run_id).usage == USAGE


def test_after_unpause_the_recorded_step_replays_and_its_function_is_not_called(
    store: actae.Store,
) -> None:
    run = store.start_run("mid-step-unpause", agent_id="a", state={})
    calls: list[str] = []
    sample = sampled(calls, stopper(store, run, "pause"))
    store.resume(run.run_id, worker="w").step("sample", sample, usage=USAGE)
    store.unpause(run.run_id, actor="ops", reason="fine")

    again = store.resume(run.run_id, worker="w2")

    assert again.step("sample", sample, usage=USAGE) == {"text": "a sampled answer"}
    assert calls == ["sample"]
    assert again.step("next", lambda: "runs now") == "runs now"
    assert store.run(run.run_id).usage == USAGE  # counted once


def charged(calls: list[str], stop: Callable[[], None]) -> Callable[[str, int], dict[str, Any]]:
    """A payment during which the operator stops the run, the first time only."""

    def charge(key: str, token: int) -> dict[str, Any]:
        calls.append("charge")
        if len(calls) == 1:
            stop()
        return {"charge_id": "ch_1"}

    return charge


@pytest.mark.parametrize("action", sorted(STOPS))
def test_an_effect_that_completes_after_a_stop_is_completed_in_the_ledger(
    store: actae.Store, action: str
) -> None:
    run = store.start_run(f"mid-effect-{action}", agent_id="a", state={})
    calls: list[str] = []
    ctx = store.resume(run.run_id, worker="w")

    assert ctx.effect("charge", charged(calls, stopper(store, run, action))) == {
        "charge_id": "ch_1"
    }

    with pytest.raises(actae.RunStoppedError, match=STOPS[action]):
        ctx.step("next", lambda: "must not run")
    effect = store.effect(f"{run.run_id}:effect:charge:1")
    assert effect.status is actae.EffectStatus.COMPLETED
    assert store.recover(run.channel_id).outstanding == []


def test_after_unpause_the_completed_effect_replays_and_its_function_is_not_called(
    store: actae.Store,
) -> None:
    run = store.start_run("mid-effect-unpause", agent_id="a", state={})
    calls: list[str] = []
    charge = charged(calls, stopper(store, run, "pause"))
    store.resume(run.run_id, worker="w").effect("charge", charge)
    store.unpause(run.run_id, actor="ops", reason="fine")

    again = store.resume(run.run_id, worker="w2")

    assert again.effect("charge", charge) == {"charge_id": "ch_1"}
    assert calls == ["charge"]


def test_a_worker_leaves_a_run_paused_in_its_last_step_paused_and_finishes_it_after_unpause(
    store: actae.Store,
) -> None:
    """The workflow's end is a boundary too: the run waits for unpause, with no cooldown."""
    calls: list[str] = []
    workflows = actae.Registry()
    run = store.start_run("last-step", agent_id="one-step", state={})

    @workflows.workflow("one-step")
    def one_step(ctx: actae.RunContext) -> dict[str, Any]:
        return ctx.step("sample", sampled(calls, stopper(store, run, "pause")), usage=USAGE)

    worker = actae.Worker(store, name="w1", registry=workflows)
    worker.run_once()
    assert store.run(run.run_id).status is actae.RunStatus.PAUSED
    assert [outcome for _, outcome in worker.outcomes] == ["paused"]

    store.unpause(run.run_id, actor="ops", reason="fine")
    worker.run_once()  # at once: no clock moves

    done = store.run(run.run_id)
    assert (done.status, done.result) == (actae.RunStatus.COMPLETED, {"text": "a sampled answer"})
    assert calls == ["sample"]
    assert done.usage == USAGE


def test_a_rivals_step_written_meanwhile_still_refuses_the_record(store: actae.Store) -> None:
    """Only notes are moved past: another worker's step means it drives the run now."""
    run = store.start_run("rival", agent_id="a", state={})
    ctx = store.resume(run.run_id, worker="w")

    def overtaken() -> str:
        store.resume(run.run_id, worker="w2").step("rival", lambda: "theirs")
        return "ours"

    with pytest.raises(actae.ConflictError):
        ctx.step("ours", overtaken)
    names = [e.contents()["name"] for e in store.events(run.channel_id) if e.kind == "step.result"]
    assert names == ["rival"]


async def test_an_awaited_step_paused_under_an_async_worker_runs_once(
    store_url: str, clock: actae.ManualClock
) -> None:
    """The same with a coroutine step under ``AsyncWorker``: paused while it is awaited."""
    calls: list[str] = []
    workflows = actae.Registry()
    async with actae.open_async(store_url, clock=clock) as store:
        run = await store.start_run("awaited", agent_id="async-sampler", state={})

        async def sample() -> dict[str, Any]:
            calls.append("sample")
            if len(calls) == 1:
                await store.pause(run.run_id, actor="ops", reason="look")
            return {"text": "a sampled answer"}

        @workflows.workflow("async-sampler")
        async def sampler(ctx: actae.AsyncRunContext) -> dict[str, Any]:
            answer = await ctx.step("sample", sample, usage=USAGE)
            return {"answer": answer, "after": await ctx.step("after", lambda: "done")}

        worker = actae.AsyncWorker(store, name="w", registry=workflows)
        await worker.run_until_idle()
        assert (await store.run(run.run_id)).status is actae.RunStatus.PAUSED
        await store.unpause(run.run_id, actor="ops", reason="fine")
        await worker.run_once()
        done = await store.run(run.run_id)
    assert (done.status, done.result) == (
        actae.RunStatus.COMPLETED,
        {"answer": {"text": "a sampled answer"}, "after": "done"},
    )
    assert calls == ["sample"]
    assert done.usage == USAGE
