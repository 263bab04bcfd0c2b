"""``async def`` workflows: awaited steps and effects, fan-out, cancellation, many runs at once."""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from typing import Any

import pytest

import actae
from tests.helpers import wait_for


async def test_an_async_workflow_awaits_async_and_sync_steps_and_replays_them(
    store_url: str, clock: actae.ManualClock
) -> None:
    calls: list[str] = []
    registry = actae.Registry()

    async def think(prompt: str) -> dict[str, Any]:  # an async LLM client's call
        await asyncio.sleep(0)
        calls.append(prompt)
        return {"text": f"answer to {prompt}"}

    def look_up() -> dict[str, Any]:  # a blocking SDK: runs in a thread
        calls.append(f"look-up in {threading.current_thread().name}")
        return {"rows": 3}

    @registry.workflow("agent")
    async def answer(ctx: actae.AsyncRunContext) -> dict[str, Any]:
        plan = await ctx.step("plan", lambda: think("plan"))
        rows = await ctx.step("look-up", look_up)
        await ctx.transition(state={"plan": plan["text"], "rows": rows["rows"]})
        decision = await ctx.wait_for_approval("go")
        final = await ctx.step("final", lambda: think("final"))
        return {"final": final["text"], "approved": decision.approved}

    async with actae.open_async(store_url, clock=clock) as store:
        run = await store.start_run("wf", agent_id="agent", state={})
        worker = actae.AsyncWorker(store, name="w", registry=registry, concurrency=2)
        await worker.run_until_idle()
        assert (await store.run(run.run_id)).status is actae.RunStatus.WAITING
        await store.approve(run.run_id, "go", actor="ops")
        await worker.run_until_idle()
        done = await store.run(run.run_id)
    assert done.status is actae.RunStatus.COMPLETED
    assert done.result == {"final": "answer to final", "approved": True}
    assert calls[0] == "plan"
    assert calls[2:] == ["final"]  # the re-run replayed plan and look-up
    assert calls[1].startswith("look-up in ")
    assert "MainThread" not in calls[1]


def test_the_sync_worker_runs_async_workflows_too(store_url: str, clock: actae.ManualClock) -> None:
    registry = actae.Registry()

    @registry.workflow("agent")
    async def double(ctx: actae.AsyncRunContext) -> dict[str, Any]:
        state = await ctx.state()
        value = await ctx.step("double", lambda: asyncio.sleep(0, result=state["n"] * 2))
        return {"n": value}

    with actae.open(store_url, clock=clock) as store:
        run = store.start_run("wf", agent_id="agent", state={"n": 21})
        actae.Worker(store, name="w", registry=registry).run_once()
        assert store.run(run.run_id).result == {"n": 42}


async def test_an_async_effect_is_claimed_heartbeated_by_a_task_and_completed(
    store_url: str,
) -> None:
    async with actae.open_async(store_url) as store:  # the store's own clock: leases run out
        run = await store.start_run("wf", agent_id="agent", state={})
        ctx = await store.resume(run.run_id, worker="w")
        key = f"{run.run_id}:effect:charge:1"
        renewed: list[Any] = []

        async def charge(idempotency_key: str, token: int) -> dict[str, Any]:
            first = (await store.effect(idempotency_key)).expires_at
            deadline = time.monotonic() + 10
            while (await store.effect(idempotency_key)).expires_at == first:
                assert time.monotonic() < deadline, "the claim was never renewed"
                await asyncio.sleep(0.05)
            renewed.append(first)
            return {"charged": token}

        # Longer than its lease on purpose: the deadline must outlast the renewal it waits for.
        result = await ctx.effect("charge", charge, lease=0.6, timeout=60)
        info = await store.effect(key)
    assert result == {"charged": 1}
    assert renewed
    assert info.status is actae.EffectStatus.COMPLETED


async def test_cancelling_the_task_inside_an_effect_leaves_it_in_doubt_never_recorded(
    store_url: str, clock: actae.ManualClock
) -> None:
    async with actae.open_async(store_url, clock=clock) as store:
        run = await store.start_run("wf", agent_id="agent", state={})
        ctx = await store.resume(run.run_id, worker="w")
        started = asyncio.Event()

        async def charge(key: str, token: int) -> dict[str, Any]:
            started.set()
            await asyncio.Event().wait()  # the provider never answers
            raise AssertionError("unreachable")

        task = asyncio.create_task(ctx.effect("charge", charge, lease=30))
        await started.wait()
        before = await store.events(run.channel_id)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        key = f"{run.run_id}:effect:charge:1"
        assert (await store.effect(key)).status is actae.EffectStatus.CLAIMED
        assert await store.events(run.channel_id) == before  # nothing half-recorded
        clock.advance(31)
        info = await store.effect(key)
        assert info.status is actae.EffectStatus.IN_DOUBT
        assert info.result is None


async def test_gather_runs_twenty_steps_at_once_and_a_rerun_replays_them(
    store_url: str, clock: actae.ManualClock
) -> None:
    running = 0
    peak = 0
    everyone_in = asyncio.Event()
    calls: list[int] = []

    async def model(index: int) -> dict[str, Any]:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        if running == 20:
            everyone_in.set()
        await asyncio.wait_for(everyone_in.wait(), 30)  # all twenty in flight together
        running -= 1
        calls.append(index)
        return {"index": index}

    async def fan_out(ctx: actae.AsyncRunContext) -> list[Any]:
        steps = (ctx.step(f"model-{i}", functools.partial(model, i)) for i in range(20))
        return await ctx.gather(*steps)

    async with actae.open_async(store_url, clock=clock) as store:
        run = await store.start_run("wf", agent_id="agent", state={})
        first = await fan_out(await store.resume(run.run_id, worker="w"))
        again = await fan_out(await store.resume(run.run_id, worker="w"))
        events = await store.events(run.channel_id)
    assert peak == 20
    assert first == again == [{"index": i} for i in range(20)]
    assert sorted(calls) == list(range(20))  # the second run called nothing
    names = [event.contents()["name"] for event in events if event.kind == "step.result"]
    assert sorted(names) == sorted(f"model-{i}" for i in range(20))


async def test_gather_lets_every_branch_finish_before_raising_the_first_failure(
    store_url: str, clock: actae.ManualClock
) -> None:
    finished: list[str] = []

    async def slow() -> str:
        await asyncio.sleep(0.2)
        finished.append("slow")
        return "slow"

    async def broken() -> str:
        raise ValueError("the tool broke")

    async with actae.open_async(store_url, clock=clock) as store:
        run = await store.start_run("wf", agent_id="agent", state={})
        ctx = await store.resume(run.run_id, worker="w")
        with pytest.raises(ValueError, match="the tool broke"):
            await ctx.gather(ctx.step("broken", broken), ctx.step("slow", slow))
        recorded = [e.contents()["name"] for e in (await store.events(run.channel_id))[1:]]
    assert finished == ["slow"]
    assert recorded == ["slow"]


async def test_fifty_at_once_serve_two_hundred_sleeping_runs_in_seconds(
    store_url: str, clock: actae.ManualClock
) -> None:
    registry = actae.Registry()
    running = 0
    peak = 0

    @registry.workflow("sleeper")
    async def sleeper(ctx: actae.AsyncRunContext) -> dict[str, Any]:
        async def nap() -> dict[str, Any]:
            nonlocal running, peak
            running += 1
            peak = max(peak, running)
            await asyncio.sleep(1)
            running -= 1
            return {"slept": 1}

        return await ctx.step("nap", nap)

    async with actae.open_async(store_url, clock=clock) as store:
        runs = [await store.start_run("wf", agent_id="sleeper", state={"i": i}) for i in range(200)]
        worker = actae.AsyncWorker(store, name="w", registry=registry, concurrency=50)
        began = time.monotonic()
        working = asyncio.create_task(worker.run())  # as `actae worker --concurrency 50` does
        served = [outcome for _, outcome in worker.outcomes]
        while served.count("completed") < 200:
            assert time.monotonic() < began + 120, f"served after 120 s: {served}"
            assert not working.done(), working
            await asyncio.sleep(0.05)  # polling the worker's progress, with a deadline
            served = [outcome for _, outcome in worker.outcomes]
        took = time.monotonic() - began
        worker.request_stop()
        await asyncio.wait_for(working, 30)
        statuses = {(await store.run(run.run_id)).status for run in runs}
    assert statuses == {actae.RunStatus.COMPLETED}
    assert 25 <= peak <= 50
    assert took < 60, f"200 one-second runs took {took:.1f} s at 50 at once"


async def test_a_stopped_async_worker_lets_its_runs_end_first(
    store_url: str, clock: actae.ManualClock
) -> None:
    registry = actae.Registry()
    inside = threading.Event()
    release = asyncio.Event()

    @registry.workflow("agent")
    async def waits(ctx: actae.AsyncRunContext) -> str:
        async def held() -> str:
            inside.set()
            await release.wait()
            return "done"

        return await ctx.step("held", held)

    async with actae.open_async(store_url, clock=clock) as store:
        run = await store.start_run("wf", agent_id="agent", state={})
        worker = actae.AsyncWorker(store, name="w", registry=registry, concurrency=4)
        working = asyncio.create_task(worker.run())
        await asyncio.to_thread(wait_for, inside.is_set, "the run to start")
        worker.request_stop()
        release.set()
        await asyncio.wait_for(working, 30)
        assert (await store.run(run.run_id)).result == {"value": "done"}


async def test_waiting_and_foreign_runs_do_not_take_a_concurrent_workers_slots(
    store_url: str, clock: actae.ManualClock
) -> None:
    registry = actae.Registry()

    @registry.workflow("approver")
    async def approver(ctx: actae.AsyncRunContext) -> str:
        decision = await ctx.wait_for_approval("go")
        return "approved" if decision.approved else "denied"

    @registry.workflow("agent")
    async def quick(ctx: actae.AsyncRunContext) -> str:
        return await ctx.step("quick", lambda: "done")

    async with actae.open_async(store_url, clock=clock) as store:
        for n in range(3):  # the oldest runs: waiting, then another agent's
            await store.start_run(f"wait-{n}", agent_id="approver", state={})
        await store.start_run("foreign", agent_id="served-elsewhere", state={})
        worker = actae.AsyncWorker(store, name="w", registry=registry, concurrency=2)
        await worker.run_until_idle()  # the three now wait for an approval
        fresh = await store.start_run("fresh", agent_id="agent", state={})
        working = asyncio.create_task(worker.run())
        began = time.monotonic()
        while (await store.run(fresh.run_id)).status is not actae.RunStatus.COMPLETED:
            assert time.monotonic() < began + 20, "the fresh run was never served"
            assert not working.done(), working
            await asyncio.sleep(0.05)  # polling the worker's progress, with a deadline
        worker.request_stop()
        await asyncio.wait_for(working, 30)


async def test_cancelling_a_concurrent_worker_leaves_its_runs_to_their_leases(
    store_url: str, clock: actae.ManualClock
) -> None:
    registry = actae.Registry()
    inside = threading.Event()

    @registry.workflow("agent")
    async def stuck(ctx: actae.AsyncRunContext) -> str:
        async def forever() -> str:
            inside.set()
            await asyncio.Event().wait()
            return "never"

        return await ctx.step("forever", forever)

    async with actae.open_async(store_url, clock=clock) as store:
        run = await store.start_run("wf", agent_id="agent", state={})
        worker = actae.AsyncWorker(store, name="w", registry=registry, concurrency=2)
        working = asyncio.create_task(worker.run())
        await asyncio.to_thread(wait_for, inside.is_set, "the step to start")
        working.cancel()  # a shutdown: asyncio.run cancels every task
        with pytest.raises(asyncio.CancelledError):
            await working
        info = await store.run(run.run_id)
        assert info.status is actae.RunStatus.RUNNING  # not failed: another worker resumes it
        ((served, outcome),) = worker.outcomes
        assert str(served) == str(run.run_id)
        assert outcome.startswith("stopped: cancelled")


async def test_plain_functions_of_a_fan_out_run_at_once_in_threads(
    store_url: str, clock: actae.ManualClock
) -> None:
    everyone = threading.Barrier(20, timeout=30)  # breaks unless all twenty wait together

    def blocking_sdk_call(index: int) -> int:
        everyone.wait()
        return index

    async with actae.open_async(store_url, clock=clock) as store:
        run = await store.start_run("wf", agent_id="agent", state={})
        ctx = await store.resume(run.run_id, worker="w")
        steps = (ctx.step(f"sdk-{i}", functools.partial(blocking_sdk_call, i)) for i in range(20))
        assert await ctx.gather(*steps) == list(range(20))
