"""Metrics: steps executed and replayed, their latency, effect attempts, and the store's gauges."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import actae
from tests.telemetry.recorded import points, unit_of


def agent_name() -> str:
    return f"agent-{uuid.uuid4().hex[:8]}"


def test_steps_are_counted_and_timed_as_executed_or_replayed(
    durable_url: str, clock: actae.ManualClock, metric_reader: InMemoryMetricReader
) -> None:
    agent = agent_name()
    with actae.open(durable_url, clock=clock) as store:
        run = store.start_run("wf", agent_id=agent, state={})
        for worker in ("w1", "w2", "w3"):  # the first runs both steps, the others replay them
            ctx = store.resume(run.run_id, worker=worker)
            ctx.step("plan", lambda: "plan")
            ctx.step("write", lambda: "text")

    executed = {"actae.agent_id": agent, "actae.replayed": False}
    replayed = {"actae.agent_id": agent, "actae.replayed": True}
    assert [p.value for p in points(metric_reader, "actae.steps", executed)] == [2]
    assert [p.value for p in points(metric_reader, "actae.steps", replayed)] == [4]
    (timed,) = points(metric_reader, "actae.step.duration", executed)
    assert timed.count == 2
    assert timed.sum > 0
    assert [p.count for p in points(metric_reader, "actae.step.duration", replayed)] == [4]
    assert unit_of(metric_reader, "actae.step.duration") == "s"
    assert unit_of(metric_reader, "actae.steps") == "{step}"


def test_effect_attempts_and_retries_are_counted(
    durable_url: str, clock: actae.ManualClock, metric_reader: InMemoryMetricReader
) -> None:
    agent = agent_name()
    answers = iter([ConnectionError("the provider is down"), {"paid": True}])

    def pay(key: str, token: int) -> object:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    policy = actae.RetryPolicy(initial_delay=1.0)
    with actae.open(durable_url, clock=clock) as store:
        run = store.start_run("wf", agent_id=agent, state={})
        with pytest.raises(actae.RetryNotDueError):
            store.resume(run.run_id, worker="w1").effect("pay", pay, retry=policy)
        clock.advance(2)
        assert store.resume(run.run_id, worker="w1").effect("pay", pay, retry=policy) == {
            "paid": True
        }
        store.resume(run.run_id, worker="w2").effect("pay", pay, retry=policy)  # replays

    labels = {"actae.agent_id": agent}
    assert [p.value for p in points(metric_reader, "actae.effect.attempts", labels)] == [2]
    assert [p.value for p in points(metric_reader, "actae.effect.retries", labels)] == [1]


@pytest.fixture
def own_reader() -> Iterator[tuple[MeterProvider, InMemoryMetricReader]]:
    """A meter provider of the test's own: ``observe`` registers its gauges once per store."""
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    yield provider, reader
    provider.shutdown()


def test_observe_reports_runs_by_status_effects_in_doubt_and_the_projection_lag(
    durable_url: str,
    clock: actae.ManualClock,
    own_reader: tuple[MeterProvider, InMemoryMetricReader],
) -> None:
    provider, reader = own_reader

    def gauge(name: str, **where: str) -> list[int]:
        labels = {f"actae.{key}": value for key, value in where.items()}
        return [point.value for point in points(reader, name, labels)]

    with (
        actae.open(durable_url, clock=clock) as store,
        actae.observe(store, meter_provider=provider),
    ):
        done = store.start_run("done", agent_id="a", state={})
        store.complete_run(done.run_id, {})
        doubtful = store.start_run("doubtful", agent_id="a", state={})
        key = f"{doubtful.run_id}:effect:pay:1"
        store.claim(key, run_id=doubtful.run_id, worker="dead", lease=30.0)
        clock.advance(31)  # its worker died inside the effect: nobody knows if it happened
        store.projector().catch_up()

        assert gauge("actae.runs", status="completed") == [1]
        assert gauge("actae.runs", status="running") == [1]
        assert gauge("actae.runs", status="failed") == [0]
        assert len(gauge("actae.runs")) == len(actae.RunStatus)
        assert gauge("actae.effects.in_doubt") == [1]
        assert gauge("actae.projection.lag") == [0]

        store.start_run("new", agent_id="a", state={})  # not projected yet
        after = store.projector().position()
        written = store._service.recorder.select_notifications(start=after + 1, limit=100)
        assert gauge("actae.projection.lag") == [len(written)]  # events, not positions
        assert gauge("actae.runs", status="running") == [1]  # as fresh as the read models
        store.projector().catch_up()
        assert gauge("actae.projection.lag") == [0]
        assert gauge("actae.runs", status="running") == [2]
        assert unit_of(reader, "actae.projection.lag") == "{event}"
    assert gauge("actae.runs") == []  # stopped before the store closed: nothing, and no error
