"""One run's failure never stops a worker, and a Retry-After header is taken as it comes."""

from __future__ import annotations

from datetime import timedelta
from email.utils import format_datetime
from typing import Any

import pytest

import actae

CUT_OFF = "model said: \ud83d"  # a lone surrogate: model output cut mid-character


class CutOffOutputError(Exception):
    """An exception whose message holds text no database can store as it is."""


def test_a_poison_run_fails_alone_and_the_others_keep_going(store: actae.Store) -> None:
    workflows = actae.Registry()

    @workflows.workflow("poison")
    def poison(ctx: actae.RunContext) -> dict[str, Any]:
        raise CutOffOutputError(CUT_OFF)

    @workflows.workflow("healthy")
    def healthy(ctx: actae.RunContext) -> dict[str, Any]:
        return {"ok": True}

    bad = store.start_run("bad", agent_id="poison", state={})
    good = store.start_run("good", agent_id="healthy", state={})

    actae.Worker(store, name="w1", registry=workflows).run_once()  # must not raise

    failed = store.run(bad.run_id)
    assert failed.status is actae.RunStatus.FAILED
    assert failed.error == "CutOffOutputError: model said: \\ud83d"
    assert store.run(good.run_id).status is actae.RunStatus.COMPLETED


class RateLimitedError(Exception):
    def __init__(self, retry_after: object) -> None:
        super().__init__("HTTP 429")
        self.retry_after = retry_after


@pytest.mark.parametrize("header", ["30", " 30 ", "HTTP-DATE"])
def test_a_retry_after_header_value_schedules_the_retry(
    store: actae.Store, clock: actae.ManualClock, header: str
) -> None:
    if header == "HTTP-DATE":
        header = format_datetime(clock() + timedelta(seconds=30), usegmt=True)
    run = store.start_run("ra", agent_id="a", state={})

    def throttled(key: str, token: int) -> None:
        raise RateLimitedError(header)

    policy = actae.RetryPolicy(initial_delay=1.0, max_delay=1.0)
    with pytest.raises(actae.RetryNotDueError) as due:
        store.resume(run.run_id, worker="w").effect("charge", throttled, retry=policy)

    assert 29.0 <= due.value.wait <= 30.0  # an HTTP date has whole seconds
    assert store.run(run.run_id).status is actae.RunStatus.RETRYING


@pytest.mark.parametrize("bad", ["soon", "-5", "nan", -1.0])
def test_an_unreadable_retry_after_is_refused_and_writes_nothing(
    store: actae.Store, bad: object
) -> None:
    run = store.start_run("rb", agent_id="a", state={})
    claim = store.claim("k", run_id=run.run_id, worker="w", lease=30)
    before = store.events(run.channel_id)

    with pytest.raises(actae.ValidationError) as refused:
        store.fail_effect("k", token=claim.token, worker="w", error="HTTP 429", retry_after=bad)  # type: ignore[arg-type]

    assert refused.value.field == "retry_after"
    assert store.events(run.channel_id) == before


class UnprintableError(Exception):
    """An exception that cannot even say what it is."""

    def __str__(self) -> str:
        raise RuntimeError("no message")


def test_a_run_whose_failure_cannot_be_recorded_stays_with_that_run(store: actae.Store) -> None:
    workflows = actae.Registry()

    @workflows.workflow("unprintable")
    def unprintable(ctx: actae.RunContext) -> dict[str, Any]:
        raise UnprintableError

    @workflows.workflow("healthy")
    def healthy(ctx: actae.RunContext) -> dict[str, Any]:
        return {"ok": True}

    stuck = store.start_run("stuck", agent_id="unprintable", state={})
    good = store.start_run("fine", agent_id="healthy", state={})

    actae.Worker(store, name="w1", registry=workflows).run_once()  # must not raise

    assert store.run(good.run_id).status is actae.RunStatus.COMPLETED
    assert store.run(stuck.run_id).status is actae.RunStatus.RUNNING  # left to its cooldown
