"""Telemetry never changes what a run does: a failing SDK leaves spans and metrics out, no more.

Each case runs the same workflow (a step, an effect, a transition, a wait, a second turn)
once untraced and once with one part of OpenTelemetry failing, and compares what the store
holds: the run's status and result and every event of its channel.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import metrics, propagate
from opentelemetry.context import Context
from opentelemetry.propagators.textmap import (
    CarrierT,
    Getter,
    Setter,
    default_getter,
    default_setter,
)
from opentelemetry.sdk.metrics import ExemplarFilter, MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import Attributes

import actae
from actae.adapters.telemetry import metrics as actae_metrics
from actae.adapters.telemetry.guard import (
    EXTRACT,
    GAUGE,
    INJECT,
    METRIC,
    PROVIDER,
    SPAN_END,
    SPAN_START,
    Guard,
)
from tests.telemetry.conftest import Switched
from tests.telemetry.recorded import Spans, points


def charge(key: str, token: int) -> dict[str, Any]:
    return {"charge": key, "token": token}


def shopping(registry: actae.Registry, agent: str) -> None:
    @registry.workflow(agent)
    def shop(ctx: actae.RunContext) -> dict[str, Any]:
        plan = ctx.step("plan", lambda: "buy one", usage={"input_tokens": 3})
        paid = ctx.effect("charge", charge)
        ctx.transition(state={"plan": plan, "paid": paid["charge"]})
        ctx.wait_for_approval("manager")
        return {"plan": plan, "paid": paid}


def shop(store: actae.Store, registry: actae.Registry, agent: str) -> str:
    """Start a run and work it to its end over two turns: what the store holds of it."""
    run = store.start_run("shop", agent_id=agent, state={}, operation_id=f"start:{agent}")
    worker = actae.Worker(store, name="w1", registry=registry)
    worker.run_once()
    store.approve(run.run_id, "manager", actor="alice")
    worker.run_once()
    done = store.run(run.run_id)
    events = [(event.kind, event.payload) for event in store.events(done.channel_id)]
    held = json.dumps([done.status.value, done.result, done.error, events], default=str)
    return held.replace(str(run.run_id), "RUN").replace(agent, "AGENT")


def untraced_and_failing(url: str, switch: Switched, fail: Callable[[], None]) -> tuple[str, str]:
    """What the store holds of the workflow run untraced, and with ``fail()`` in force."""
    registry = actae.Registry()
    untraced, traced = (f"agent-{uuid.uuid4().hex[:8]}" for _ in range(2))
    shopping(registry, untraced)
    shopping(registry, traced)
    with actae.open(url, clock=actae.ManualClock()) as store:
        switch.on = False
        expected = shop(store, registry, untraced)
        switch.on = True
        fail()
        return expected, shop(store, registry, traced)


class Hiccup(SpanProcessor):
    """A span processor that raises when a span starts, or when it ends."""

    def __init__(self, when: str) -> None:
        self.when = when

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if self.when == "start":
            raise RuntimeError("exporter hiccup")

    def on_end(self, span: ReadableSpan) -> None:
        if self.when == "end":
            raise RuntimeError("exporter hiccup")


class BrokenPropagator(TraceContextTextMapPropagator):
    """W3C trace context, but raising on ``inject`` or on ``extract``."""

    def __init__(self, broken: str) -> None:
        self.broken = broken

    def inject(
        self,
        carrier: CarrierT,
        context: Context | None = None,
        setter: Setter[CarrierT] = default_setter,
    ) -> None:
        if self.broken == "inject":
            raise RuntimeError("propagator hiccup")
        super().inject(carrier, context, setter)

    def extract(
        self,
        carrier: CarrierT,
        context: Context | None = None,
        getter: Getter[CarrierT] = default_getter,
    ) -> Context:
        if self.broken == "extract":
            raise RuntimeError("propagator hiccup")
        return super().extract(carrier, context, getter)


class Refusing(ExemplarFilter):
    """Makes every measurement of the SDK's instruments raise."""

    def should_sample(
        self, value: float, time_unix_nano: int, attributes: Attributes, context: Context
    ) -> bool:
        raise RuntimeError("meter hiccup")


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.db'}"


@pytest.fixture
def propagator() -> Iterator[Callable[[str], None]]:
    """Installs a broken global propagator for the test."""
    configured = propagate.get_global_textmap()
    yield lambda broken: propagate.set_global_textmap(BrokenPropagator(broken))
    propagate.set_global_textmap(configured)


@pytest.fixture
def meter_hiccup(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[], None]]:
    """Makes the instruments of the global meter provider raise on every measurement."""
    provider = MeterProvider(metric_readers=[InMemoryMetricReader()], exemplar_filter=Refusing())

    def fail() -> None:
        failing = actae_metrics._instruments_of(provider.get_meter("actae"))
        monkeypatch.setattr(actae_metrics, "_made", (metrics.get_meter_provider(), failing))

    yield fail
    provider.shutdown()


def warned(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "actae.telemetry"]


def said_once(caplog: pytest.LogCaptureFixture, guard: Guard) -> None:
    """The guard's failure was logged, once, and no other (a run makes many such calls)."""
    lines = warned(caplog)
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"telemetry: {guard.kind} failed (RuntimeError: ")


CASES = ["span processor raises on start", "span processor raises on end"]


@pytest.mark.parametrize("case", CASES)
def test_a_failing_span_processor_changes_nothing_a_run_does(
    case: str,
    sqlite_url: str,
    switch: Switched,
    traced_by: Callable[[TracerProvider], None],
    spans: Spans,
    caplog: pytest.LogCaptureFixture,
) -> None:
    when = case.rsplit(" ", 1)[1]
    provider = TracerProvider()
    provider.add_span_processor(Hiccup(when))

    expected, got = untraced_and_failing(sqlite_url, switch, lambda: traced_by(provider))

    assert got == expected
    said_once(caplog, SPAN_START if when == "start" else SPAN_END)


@pytest.mark.postgres
def test_a_span_processor_failing_on_postgres_changes_nothing_a_run_does(
    pg_url: str,
    switch: Switched,
    traced_by: Callable[[TracerProvider], None],
    spans: Spans,
    caplog: pytest.LogCaptureFixture,
) -> None:
    provider = TracerProvider()
    provider.add_span_processor(Hiccup("end"))

    expected, got = untraced_and_failing(pg_url, switch, lambda: traced_by(provider))

    assert got == expected
    said_once(caplog, SPAN_END)


@pytest.mark.parametrize("broken", ["inject", "extract"])
def test_a_failing_propagator_changes_nothing_a_run_does(
    broken: str,
    sqlite_url: str,
    switch: Switched,
    spans: Spans,
    propagator: Callable[[str], None],
    caplog: pytest.LogCaptureFixture,
) -> None:
    expected, got = untraced_and_failing(sqlite_url, switch, lambda: propagator(broken))

    assert got == expected
    said_once(caplog, INJECT if broken == "inject" else EXTRACT)
    assert len(spans.named("actae.run")) == 2  # traced still, in a trace of the run's own


def test_failing_instruments_change_nothing_a_run_does(
    sqlite_url: str,
    switch: Switched,
    spans: Spans,
    meter_hiccup: Callable[[], None],
    caplog: pytest.LogCaptureFixture,
) -> None:
    expected, got = untraced_and_failing(sqlite_url, switch, meter_hiccup)

    assert got == expected
    said_once(caplog, METRIC)


class NoMeters(MeterProvider):
    def get_meter(self, *args: Any, **kwargs: Any) -> metrics.Meter:
        raise RuntimeError("meter hiccup")


def test_gauges_that_cannot_be_read_report_nothing_and_say_so_once(
    sqlite_url: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    with actae.open(sqlite_url) as store, actae.observe(store, meter_provider=provider):
        store.start_run("wf", agent_id="a", state={})
        store.projector().catch_up()
        assert [p.value for p in points(reader, "actae.runs", {"actae.status": "running"})] == [1]

        def gone() -> None:
            raise RuntimeError("database gone")

        monkeypatch.setattr(store, "projector", gone)
        assert points(reader, "actae.runs", {}) == []
        assert points(reader, "actae.projection.lag", {}) == []
        assert points(reader, "actae.runs", {}) == []  # collected again: said once
        said_once(caplog, GAUGE)
        monkeypatch.undo()
        with actae.observe(store, meter_provider=NoMeters()):  # no gauges, and no error
            assert warned(caplog)[1].startswith(f"telemetry: {PROVIDER.kind} failed")
    provider.shutdown()


def test_a_provider_that_cannot_make_meters_leaves_the_api_s_no_op_instruments(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    failing = NoMeters()
    monkeypatch.setattr(metrics, "get_meter_provider", lambda: failing)
    monkeypatch.setattr(actae_metrics, "_made", None)
    made = actae_metrics.instruments()
    made.steps.add(1)  # a no-op instrument: nothing raised, nothing recorded
    assert made is actae_metrics.instruments()  # made once for the provider
    assert warned(caplog)[0].startswith(f"telemetry: {PROVIDER.kind} failed")
