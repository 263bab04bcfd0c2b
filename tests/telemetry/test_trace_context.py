"""The trace context a run keeps: where it started, never part of what the start asked for."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from opentelemetry import trace

import actae
from actae.adapters.runtime.worker import run_until_idle
from actae.adapters.telemetry.tracing import run_span_context
from actae.domain.validation import TRACE_CONTEXT_ENTRIES, storable_trace_context
from tests.telemetry.conftest import Switched
from tests.telemetry.recorded import Spans, attributes, context_of, is_child, traceparent_of


def test_a_run_started_inside_a_span_keeps_that_span_as_its_start(
    durable_url: str, spans: Spans
) -> None:
    with actae.open(durable_url) as store:
        with trace.get_tracer("test").start_as_current_span("POST /invoices"):
            run = store.start_run("wf", agent_id="a", state={})
        assert store.run(run.run_id).trace_context == run.trace_context

    request = spans.one("POST /invoices")
    assert run.trace_context == {"traceparent": traceparent_of(request)}
    assert [span.name for span in spans.all()] == ["POST /invoices"]  # no actae.start of its own


def test_the_same_start_retried_from_another_span_is_the_same_start(
    durable_url: str, spans: Spans
) -> None:
    tracer = trace.get_tracer("test")
    with actae.open(durable_url) as store:
        with tracer.start_as_current_span("first delivery"):
            first = store.start_run("wf", agent_id="a", state={}, operation_id="start:wf")
        with tracer.start_as_current_span("redelivery"):
            again = store.start_run("wf", agent_id="a", state={}, operation_id="start:wf")
        # and from no span at all: recognised before anything would be written
        once_more = store.start_run("wf", agent_id="a", state={}, operation_id="start:wf")

    assert (again.replayed, once_more.replayed) == (True, True)
    assert again.run_id == once_more.run_id == first.run_id
    assert again.trace_context == first.trace_context
    assert first.trace_context["traceparent"] == traceparent_of(spans.one("first delivery"))


def test_without_an_sdk_nothing_is_kept_and_nothing_breaks(
    durable_url: str, clock: actae.ManualClock
) -> None:
    with actae.open(durable_url, clock=clock) as store:
        run = store.start_run("wf", agent_id="a", state={})
        ctx = store.resume(run.run_id, worker="w")
        assert ctx.step("one", lambda: 1) == 1
        child = ctx.start_child("wf-child", agent_id="b", state={})
    assert run.trace_context == {} == child.trace_context


def test_a_child_run_continues_from_where_its_parent_started_it(
    durable_url: str, clock: actae.ManualClock, spans: Spans
) -> None:
    registry = actae.Registry()
    parent_agent, child_agent = f"p-{uuid.uuid4().hex[:8]}", f"c-{uuid.uuid4().hex[:8]}"

    @registry.workflow(parent_agent)
    def delegate(ctx: actae.RunContext) -> dict[str, Any]:
        child = ctx.start_child("invoice", agent_id=child_agent, state={})
        return ctx.wait_for_child(child).payload

    @registry.workflow(child_agent)
    def invoice(ctx: actae.RunContext) -> dict[str, Any]:
        return {"invoice": ctx.step("number", lambda: "INV-7")}

    with actae.open(durable_url, clock=clock) as store:
        run = store.start_run("purchase", agent_id=parent_agent, state={})
        run_until_idle(actae.Worker(store, name="w1", registry=registry))
        (child_id,) = store.lineage(run.run_id).children
        child = store.run(child_id)
        assert store.run(run.run_id).status is actae.RunStatus.COMPLETED

    parent_turn = next(
        span
        for span in spans.named("actae.run")
        if attributes(span)["actae.run_id"] == str(run.run_id)
    )
    assert child.trace_context == {"traceparent": traceparent_of(parent_turn)}
    (child_turn,) = (
        span
        for span in spans.named("actae.run")
        if attributes(span)["actae.run_id"] == str(child_id)
    )
    assert is_child(child_turn, parent_turn)
    start = spans.one(f"actae.start {parent_agent}")
    assert {context_of(span).trace_id for span in spans.all()} == {context_of(start).trace_id}


def test_a_fork_keeps_a_trace_of_its_own(durable_url: str, spans: Spans) -> None:
    with actae.open(durable_url) as store:
        run = store.start_run("wf", agent_id="a", state={})
        fork = store.fork(run.channel_id, at=1, reason="try another model")
        forked = store.run(fork.child_run_id)

    own = spans.one("actae.fork")
    assert attributes(own)["actae.run_id"] == str(fork.child_run_id)
    assert forked.trace_context == {"traceparent": traceparent_of(own)}
    assert forked.trace_context != run.trace_context


def test_only_what_every_backend_can_keep_is_kept_of_a_trace_context() -> None:
    given: Any = {
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "tracestate": "vendor=x" * 600,  # longer than any text the store keeps
        "nul": "a\x00b",
        "number": 7,
        "": "empty key",
        **{f"extra-{n}": "x" for n in range(2 * TRACE_CONTEXT_ENTRIES)},
    }

    kept = storable_trace_context(given)

    assert kept["traceparent"] == given["traceparent"]
    assert not {"tracestate", "nul", "number", ""} & set(kept)
    assert len(kept) == TRACE_CONTEXT_ENTRIES
    assert storable_trace_context(None) == {} == storable_trace_context(["traceparent"])  # type: ignore[arg-type]


def test_a_run_that_kept_no_trace_context_is_the_trace_named_by_its_id(
    durable_url: str, clock: actae.ManualClock, switch: Switched, spans: Spans
) -> None:
    registry, agent = actae.Registry(), f"a-{uuid.uuid4().hex[:8]}"

    @registry.workflow(agent)
    def approved(ctx: actae.RunContext) -> dict[str, Any]:
        plan = ctx.step("plan", lambda: "buy one")
        ctx.wait_for_approval("manager")
        return {"plan": plan, "bought": ctx.step("buy", lambda: True)}

    with actae.open(durable_url, clock=clock) as store:
        switch.on = False  # started by a process that traces nothing: nothing to keep
        run = store.start_run("wf", agent_id=agent, state={})
        switch.on = True
        assert run.trace_context == {}
        store.resume(run.run_id, worker="script").step("plan", lambda: "buy one")
        worker = actae.Worker(store, name="w1", registry=registry)
        worker.run_once()
        store.approve(run.run_id, "manager", actor="alice")
        worker.run_once()
        assert store.run(run.run_id).status is actae.RunStatus.COMPLETED

    first, second = spans.named("actae.run")
    script_step = spans.named("actae.step plan")[0]
    assert {context_of(span).trace_id for span in spans.all()} == {run.run_id.int}
    made = run_span_context(run.run_id)
    assert made.span_id != 0
    assert made.trace_flags.sampled
    for span in (first, second, script_step):  # all under the parent the run's id names
        assert span.parent is not None
        assert (span.parent.trace_id, span.parent.span_id) == (run.run_id.int, made.span_id)
        assert span.parent.is_remote
    assert spans.names_under(second) == ["actae.step plan", "actae.wait approval", "actae.step buy"]


def test_a_repeated_start_or_fork_outside_any_span_opens_no_span_of_its_own(
    durable_url: str, spans: Spans
) -> None:
    with actae.open(durable_url) as store:
        run = store.start_run("wf", agent_id="a", state={}, operation_id="start:wf")
        again = store.start_run("wf", agent_id="a", state={}, operation_id="start:wf")
        store.fork(run.channel_id, at=1, operation_id="fork:wf")
        fork_again = store.fork(run.channel_id, at=1, operation_id="fork:wf")

    assert (again.replayed, fork_again.replayed) == (True, True)
    assert [span.name for span in spans.all()] == ["actae.start a", "actae.fork"]
    assert again.trace_context == run.trace_context


def test_a_repeated_start_that_got_past_the_look_says_it_replayed(
    durable_url: str, spans: Spans, monkeypatch: pytest.MonkeyPatch
) -> None:
    with actae.open(durable_url) as store:
        run = store.start_run("wf", agent_id="a", state={}, operation_id="start:wf")
        # as if the first start committed between the repeat's look and its write
        monkeypatch.setattr(store, "operation", lambda operation_id: None)
        again = store.start_run("wf", agent_id="a", state={}, operation_id="start:wf")

    first, echo = spans.named("actae.start a")
    assert again.replayed
    assert "actae.replayed" not in attributes(first)
    assert attributes(echo)["actae.replayed"] is True
    assert attributes(echo)["actae.run_id"] == str(run.run_id)
    assert run.trace_context == {"traceparent": traceparent_of(first)}
