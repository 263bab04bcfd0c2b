"""The spans of a run: one trace from its start through every worker's turn and call."""

from __future__ import annotations

import asyncio
import functools
import uuid
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.trace import StatusCode

import actae
from tests.telemetry.recorded import (
    Spans,
    attributes,
    context_of,
    is_child,
    traceparent_of,
)


def agent_name() -> str:
    return f"agent-{uuid.uuid4().hex[:8]}"


def charge(key: str, token: int) -> dict[str, Any]:
    return {"charge": key, "token": token}


def purchasing(registry: actae.Registry, agent: str) -> None:
    """A workflow with one of each call: a step, an effect, a transition, a wait."""

    @registry.workflow(agent)
    def purchase(ctx: actae.RunContext) -> dict[str, Any]:
        usage = {"input_tokens": 120, "output_tokens": 30, "cost": 0.02}
        plan = ctx.step("plan", lambda: "buy one", usage=usage)
        receipt = ctx.effect("charge", charge)
        ctx.transition(state={"plan": plan, "charged": receipt["charge"]})
        ctx.wait_for_approval("manager")
        return {"plan": plan}


def test_a_worker_turn_is_a_tree_of_spans_in_the_trace_the_run_started_in(
    durable_url: str, clock: actae.ManualClock, spans: Spans
) -> None:
    registry, agent = actae.Registry(), agent_name()
    purchasing(registry, agent)
    with actae.open(durable_url, clock=clock) as store:
        run = store.start_run("wf-1", agent_id=agent, state={}, pins={"model": "m-1"})
        worker = actae.Worker(store, name="w1", registry=registry)
        worker.run_once()

        start = spans.one(f"actae.start {agent}")  # the agent names it, never the workflow id
        assert run.trace_context["traceparent"] == traceparent_of(start)
        assert attributes(start)["actae.run_id"] == str(run.run_id)
        turn = spans.one("actae.run")
        assert is_child(turn, start)
        assert context_of(turn).trace_id == context_of(start).trace_id
        assert attributes(turn) | {"actae.run.outcome": "?"} == {
            "actae.run_id": str(run.run_id),
            "actae.workflow_id": "wf-1",
            "actae.agent_id": agent,
            "gen_ai.request.model": "m-1",
            "actae.worker": "w1",
            "actae.cursor": 1,
            "actae.state_version": 1,
            "actae.run.outcome": "?",
        }
        assert spans.names_under(turn) == [
            "actae.step plan",
            "actae.effect charge",
            "actae.transition",
            "actae.wait approval",
        ]
        step, effect, transition, wait = spans.children(turn)
        assert attributes(step) == {
            "actae.run_id": str(run.run_id),
            "actae.workflow_id": "wf-1",
            "actae.agent_id": agent,
            "gen_ai.request.model": "m-1",
            "actae.operation_id": f"{run.run_id}:step:plan:1",
            "actae.replayed": False,
            "actae.cursor": 2,
            "actae.state_version": 1,
            "gen_ai.usage.input_tokens": 120,
            "gen_ai.usage.output_tokens": 30,
            "actae.cost": 0.02,
        }
        effect_key = f"{run.run_id}:effect:charge:1"
        assert attributes(effect)["actae.operation_id"] == effect_key
        assert attributes(effect)["actae.effect.attempt"] == 1
        assert attributes(effect)["actae.effect.fencing_token"] == store.effect(effect_key).token
        assert attributes(effect)["actae.effect.outcome"] == "completed"
        assert attributes(effect)["actae.effect.in_doubt"] is False
        assert attributes(transition)["actae.state_version"] == 2
        assert attributes(transition)["actae.replayed"] is False
        assert attributes(wait)["actae.wait.name"] == "manager"
        assert attributes(wait)["actae.wait.outcome"] == "suspended"
        assert wait.status.status_code is StatusCode.UNSET  # waiting is no failure
        assert attributes(turn)["actae.run.outcome"].startswith("waiting")

        spans_of_first_turn = len(spans.all())
        store.approve(run.run_id, "manager", actor="alice")
        worker.run_once()

    second = spans.named("actae.run")[1]
    assert is_child(second, start)  # the same trace, under the same start
    assert attributes(second)["actae.run.outcome"] == "completed"
    step, effect, transition, wait = spans.children(second)
    assert (attributes(step)["actae.replayed"], attributes(step)["actae.cursor"]) == (True, 2)
    assert "gen_ai.usage.input_tokens" not in attributes(step)  # nothing was spent this time
    assert attributes(effect)["actae.effect.outcome"] == "replayed"
    assert "actae.cursor" not in attributes(effect)  # the ledger's, not looked up (the doc)
    assert attributes(transition)["actae.replayed"] is True
    assert attributes(wait)["actae.wait.outcome"] == "decided"
    trace_ids = {context_of(span).trace_id for span in spans.all()}
    assert trace_ids == {context_of(start).trace_id}
    assert len(spans.all()) == spans_of_first_turn + 5


def test_a_replayed_step_is_a_span_that_says_so_and_does_no_work(
    durable_url: str, clock: actae.ManualClock, spans: Spans
) -> None:
    calls = []

    def think() -> str:
        calls.append("think")
        with trace.get_tracer("test").start_as_current_span("llm think"):  # the model call
            return "answer"

    with actae.open(durable_url, clock=clock) as store:
        run = store.start_run("wf-2", agent_id=agent_name(), state={})
        store.resume(run.run_id, worker="w1").step("think", think)
        assert store.resume(run.run_id, worker="w2").step("think", think) == "answer"

    executed, replayed = spans.named("actae.step think")
    assert attributes(executed)["actae.replayed"] is False
    assert attributes(replayed)["actae.replayed"] is True
    assert attributes(replayed)["actae.cursor"] == attributes(executed)["actae.cursor"] == 2
    assert calls == ["think"]  # answered from the log: no model call, no time spent in one
    assert spans.names_under(executed) == ["llm think"]
    assert spans.names_under(replayed) == []


def test_calls_of_a_context_outside_any_span_join_the_trace_the_run_started_in(
    durable_url: str, clock: actae.ManualClock, spans: Spans
) -> None:
    with actae.open(durable_url, clock=clock) as store:
        agent = agent_name()
        run = store.start_run("wf-3", agent_id=agent, state={})
        ctx = store.resume(run.run_id, worker="script")
        ctx.step("one", lambda: 1)
        ctx.transition(state={"one": 1})

    start = spans.one(f"actae.start {agent}")
    assert spans.names_under(start) == ["actae.step one", "actae.transition"]


def test_a_failing_step_or_effect_marks_its_span_and_the_turn_as_errors(
    durable_url: str, clock: actae.ManualClock, spans: Spans
) -> None:
    registry, agent = actae.Registry(), agent_name()

    def broken() -> str:
        raise ValueError("the model answered nonsense")

    @registry.workflow(agent)
    def fails(ctx: actae.RunContext) -> None:
        ctx.step("parse", broken)

    def refused(key: str, token: int) -> None:
        raise ConnectionError("the provider is down")

    with actae.open(durable_url, clock=clock) as store:
        run = store.start_run("wf-4", agent_id=agent, state={})
        actae.Worker(store, name="w1", registry=registry).run_once()
        assert store.run(run.run_id).status is actae.RunStatus.FAILED
        other = store.start_run("wf-5", agent_id=agent_name(), state={})
        with pytest.raises(actae.RetryNotDueError):
            store.resume(other.run_id, worker="w1").effect("pay", refused)
        failure_noted = store.head(other.channel_id)
        assert failure_noted.cursor > 1

    step = spans.one("actae.step parse")
    assert step.status.status_code is StatusCode.ERROR
    assert [event.name for event in step.events] == ["exception"]
    assert step.events[0].attributes is not None
    assert step.events[0].attributes["exception.type"] == "ValueError"
    turn = spans.one("actae.run")
    assert turn.status.status_code is StatusCode.ERROR
    assert attributes(turn)["actae.run.outcome"].startswith("failed: ValueError")
    effect = spans.one("actae.effect pay")
    assert effect.status.status_code is StatusCode.ERROR
    assert attributes(effect)["actae.effect.outcome"] == "failed"
    assert attributes(effect)["actae.cursor"] == failure_noted.cursor  # the ledger's note
    assert attributes(effect)["actae.state_version"] == failure_noted.state_version
    assert step.events[0].attributes is not None


def test_an_async_workflow_on_an_async_worker_is_the_same_tree(
    durable_url: str, clock: actae.ManualClock, spans: Spans
) -> None:
    registry, agent = actae.Registry(), agent_name()

    async def think(topic: str) -> str:
        await asyncio.sleep(0)
        with trace.get_tracer("test").start_as_current_span(f"llm {topic}"):
            return f"notes on {topic}"

    @registry.workflow(agent)
    async def research(ctx: actae.AsyncRunContext) -> dict[str, Any]:
        outline = await ctx.step("outline", lambda: think("outline"))
        sections = await ctx.gather(
            *(ctx.step(f"section-{i}", functools.partial(think, f"#{i}")) for i in range(3))
        )
        await ctx.transition(state={"outline": outline, "sections": sections})
        await ctx.sleep(60)
        return {"sections": len(sections)}

    async def main() -> actae.RunInfo:
        async with actae.open_async(durable_url, clock=clock) as store:
            run = await store.start_run("wf-6", agent_id=agent, state={})
            worker = actae.AsyncWorker(store, name="w1", registry=registry, concurrency=2)
            await worker.run_until_idle()
            clock.advance(61)
            await worker.run_until_idle()
            return await store.run(run.run_id)

    done = asyncio.run(main())
    assert done.status is actae.RunStatus.COMPLETED
    first, second = spans.named("actae.run")
    start = spans.one(f"actae.start {agent}")
    assert is_child(first, start)
    assert is_child(second, start)
    assert sorted(spans.names_under(first)) == [
        "actae.step outline",
        "actae.step section-0",
        "actae.step section-1",
        "actae.step section-2",
        "actae.transition",
        "actae.wait timer",
    ]
    outline = spans.children(first)[0]
    assert spans.names_under(outline) == ["llm outline"]  # the model call's own span
    replayed = [attributes(span)["actae.replayed"] for span in spans.children(second)[:5]]
    assert replayed == [True] * 5
    assert {context_of(span).trace_id for span in spans.all()} == {context_of(start).trace_id}


def test_an_effect_in_doubt_says_so_whether_reconciled_or_stopped_for_review(
    durable_url: str, clock: actae.ManualClock, spans: Spans
) -> None:
    with actae.open(durable_url, clock=clock) as store:
        runs = [store.start_run(f"wf-{n}", agent_id=agent_name(), state={}) for n in (7, 8)]
        for run in runs:  # a worker died inside the effect: its lease ran out unanswered
            key = f"{run.run_id}:effect:pay:1"
            store.claim(key, run_id=run.run_id, worker="dead", lease=30.0, request={"name": "pay"})
        clock.advance(31)
        reconciled, unknown = (store.resume(run.run_id, worker="w2") for run in runs)
        assert reconciled.effect("pay", charge, reconcile=lambda key: {"paid": key}) == {
            "paid": f"{runs[0].run_id}:effect:pay:1"
        }
        with pytest.raises(actae.EffectBlockedError):
            unknown.effect("pay", charge)
        noted = [store.head(run.channel_id) for run in runs]  # where the ledger settled each

    settled, blocked = spans.named("actae.effect pay")
    for span, head in zip((settled, blocked), noted, strict=True):
        assert attributes(span)["actae.effect.outcome"] == "in doubt"
        assert attributes(span)["actae.effect.in_doubt"] is True
        assert attributes(span)["actae.effect.attempt"] == 2
        assert attributes(span)["actae.replayed"] is False
        assert (attributes(span)["actae.cursor"], attributes(span)["actae.state_version"]) == (
            head.cursor,
            head.state_version,
        )
        assert head.cursor > 1
    assert settled.status.status_code is StatusCode.UNSET
    assert blocked.status.status_code is StatusCode.ERROR
