"""Model calls are retried by policy, a failed run can be sent back, and a step whose result
cannot be recorded fails loudly instead of being called again and again.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

import actae


class RateLimitedError(Exception):
    """A provider's HTTP 429, with the Retry-After it sent."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"HTTP 429, retry after {retry_after:g} s")
        self.retry_after = retry_after


class FlakyModel:
    """Answers 429 ``failures`` times, then an answer; logs every call."""

    def __init__(self, failures: int, retry_after: float = 2.0) -> None:
        self.failures = failures
        self.retry_after = retry_after
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise RateLimitedError(self.retry_after)
        return f"answer after {self.calls} calls"


def test_a_rate_limited_step_is_retried_after_its_retry_after(
    store: actae.Store, clock: actae.ManualClock
) -> None:
    run = store.start_run("r", agent_id="a", state={})
    model = FlakyModel(failures=1, retry_after=2.0)
    policy = actae.RetryPolicy(initial_delay=0.5, max_delay=1.0)

    with pytest.raises(actae.RetryNotDueError) as first:
        store.resume(run.run_id, worker="w").step("plan", model, retry=policy)
    assert first.value.wait == pytest.approx(2.0)  # Retry-After wins over a 1 s backoff
    assert store.run(run.run_id).status is actae.RunStatus.RETRYING

    clock.advance(1.9)
    with pytest.raises(actae.RetryNotDueError):
        store.resume(run.run_id, worker="w").step("plan", model, retry=policy)
    assert model.calls == 1  # not before it is due

    clock.advance(0.1)
    answer = store.resume(run.run_id, worker="w").step("plan", model, retry=policy)

    assert answer == "answer after 2 calls"
    assert store.run(run.run_id).status is actae.RunStatus.RUNNING
    again = store.resume(run.run_id, worker="w").step("plan", model, retry=policy)
    assert (again, model.calls) == (answer, 2)  # recorded: replayed, not called


def test_an_exhausted_step_fails_the_run_with_the_reason(
    store: actae.Store, clock: actae.ManualClock
) -> None:
    run = store.start_run("r2", agent_id="a", state={})
    model = FlakyModel(failures=99)
    policy = actae.RetryPolicy(max_attempts=2, initial_delay=1.0, max_delay=1.0)

    with pytest.raises(actae.RetryNotDueError):
        store.resume(run.run_id, worker="w").step("plan", model, retry=policy)
    clock.advance(5)
    with pytest.raises(actae.RunStoppedError):
        store.resume(run.run_id, worker="w").step("plan", model, retry=policy)

    failed = store.run(run.run_id)
    assert failed.status is actae.RunStatus.FAILED
    assert failed.error is not None
    assert failed.error.startswith("step 'plan' failed after 2 attempts: RateLimitedError: ")
    assert store.recover(run.channel_id).outstanding == []


def test_retry_run_sends_a_failed_run_back_and_replays_its_steps(
    store: actae.Store, clock: actae.ManualClock
) -> None:
    run = store.start_run("r3", agent_id="a", state={})
    research = FlakyModel(failures=0)
    model = FlakyModel(failures=3)
    policy = actae.RetryPolicy(max_attempts=2, initial_delay=1.0, max_delay=1.0)

    def workflow(ctx: actae.RunContext) -> str:
        ctx.step("research", research)
        return ctx.step("plan", model, retry=policy)

    with pytest.raises(actae.RetryNotDueError):
        workflow(store.resume(run.run_id, worker="w"))
    clock.advance(5)
    with pytest.raises(actae.RunStoppedError):
        workflow(store.resume(run.run_id, worker="w"))
    with pytest.raises(actae.IllegalTransitionError):
        store.unpause(run.run_id, actor="ops", reason="not paused: failed")

    info = store.retry_run(run.run_id, actor="ops", reason="provider quota raised")
    with pytest.raises(actae.RetryNotDueError):  # a fresh budget in the new round
        workflow(store.resume(run.run_id, worker="w"))
    clock.advance(5)
    answer = workflow(store.resume(run.run_id, worker="w"))

    assert (info.status, info.retries, info.error) == (actae.RunStatus.RUNNING, 1, None)
    assert answer == "answer after 4 calls"
    assert research.calls == 1  # replayed, not re-sampled
    note = store.events(run.channel_id)[
        [e.kind for e in store.events(run.channel_id)].index("run.retried")
    ]
    assert note.payload == {"actor": "ops", "reason": "provider quota raised"}
    with pytest.raises(actae.IllegalTransitionError):
        store.retry_run(run.run_id, actor="ops", reason="it is running")


def test_a_retry_after_past_the_budget_says_why_it_was_not_retried(
    store: actae.Store,
) -> None:
    run = store.start_run("r4", agent_id="a", state={})

    def throttled(key: str, token: int) -> None:
        raise RateLimitedError(900)

    with pytest.raises(actae.EffectBlockedError):
        store.resume(run.run_id, worker="w").effect(
            "charge", throttled, retry=actae.RetryPolicy(max_total=600)
        )

    (effect,) = store.recover(run.channel_id).outstanding
    assert effect.last_error == (
        "RateLimitedError: HTTP 429, retry after 900 s (not retried: Retry-After 900 s would end "
        "past the retry policy's total budget of 600 s from the first attempt)"
    )


def test_exhausted_attempts_say_so(store: actae.Store, clock: actae.ManualClock) -> None:
    run = store.start_run("r5", agent_id="a", state={})

    def down(key: str, token: int) -> None:
        raise RateLimitedError(0)

    policy = actae.RetryPolicy(max_attempts=1)
    with pytest.raises(actae.EffectBlockedError):
        store.resume(run.run_id, worker="w").effect("charge", down, retry=policy)

    (effect,) = store.recover(run.channel_id).outstanding
    assert effect.last_error is not None
    assert effect.last_error.endswith("(not retried: all 1 attempts of the retry policy are used)")


def test_a_step_result_that_is_not_json_fails_the_run_once(store: actae.Store) -> None:
    run = store.start_run("r6", agent_id="a", state={})
    calls: list[int] = []

    def when() -> Any:
        calls.append(1)
        return datetime(2026, 11, 30, tzinfo=UTC)

    with pytest.raises(actae.ValidationError) as refused:
        store.resume(run.run_id, worker="w").step("when", when)

    assert refused.value.field == "step 'when'"
    failed = store.run(run.run_id)
    assert failed.status is actae.RunStatus.FAILED
    assert failed.error is not None
    assert failed.error.startswith("step 'when': its result")
    assert "not plain JSON" in failed.error
    with pytest.raises(actae.RunStoppedError):
        store.resume(run.run_id, worker="w").step("when", when)
    assert calls == [1]  # never called again on its own


def test_a_worker_killed_while_giving_up_a_step_fails_the_run_on_the_next_run(
    store: actae.Store, clock: actae.ManualClock
) -> None:
    """Exhausting a step is three writes; a worker that died after the first left the
    attempts needing review and the run running: the next run finishes giving up."""
    run = store.start_run("r7", agent_id="a", state={})
    model = FlakyModel(failures=99)
    policy = actae.RetryPolicy(max_attempts=1)
    key = f"{run.run_id}:step:plan:1:attempts"
    claim = store.claim(key, run_id=run.run_id, worker="dead", lease=60, retry=policy)
    store.fail_effect(
        key, token=claim.token, worker="dead", error="RateLimitedError: HTTP 429"
    )  # then SIGKILL

    with pytest.raises(actae.RunStoppedError):
        store.resume(run.run_id, worker="w").step("plan", model, retry=policy)

    assert model.calls == 0
    assert store.run(run.run_id).status is actae.RunStatus.FAILED
    assert store.recover(run.channel_id).outstanding == []


def test_retry_run_closes_the_attempts_an_earlier_round_left_open(
    store: actae.Store, clock: actae.ManualClock
) -> None:
    run = store.start_run("r8", agent_id="a", state={})
    model = FlakyModel(failures=1)
    policy = actae.RetryPolicy(initial_delay=1.0, max_delay=1.0)
    with pytest.raises(actae.RetryNotDueError):
        store.resume(run.run_id, worker="w").step("plan", model, retry=policy)
    store.fail_run(run.run_id, "deadline passed", actor="ops")  # while the step was retrying

    store.retry_run(run.run_id, actor="ops", reason="deadline extended")
    store.resume(run.run_id, worker="w").step("plan", model, retry=policy)

    assert store.run(run.run_id).status is actae.RunStatus.RUNNING  # not 'retrying' forever
    assert store.recover(run.channel_id).outstanding == []


def test_a_paused_run_is_refused_a_migration_as_paused(store: actae.Store) -> None:
    run = store.start_run("r9", agent_id="a", state={}, pins={"schema": 1})
    store.pause(run.run_id, actor="ops", reason="hold")

    with pytest.raises(actae.IllegalTransitionError, match="paused"):
        store.resume(run.run_id, worker="w", pins={"schema": 2}, migrations={1: dict})


def test_an_effect_settled_with_a_plain_result_returns_it_as_given(
    store: actae.Store, in_doubt: Callable[[actae.RunInfo, str], str]
) -> None:
    run = store.start_run("r10", agent_id="a", state={})
    key = in_doubt(run, "send")
    store.reconcile(key, "completed", actor="ops", result={"message_id": "m-3"})

    sent = store.resume(run.run_id, worker="w").effect("send", lambda key, token: None)

    assert sent == {"message_id": "m-3"}


def test_a_step_attempt_whose_worker_died_asks_nobody_to_reconcile(
    store: actae.Store, clock: actae.ManualClock
) -> None:
    """A step is made again, not reconciled: its lapsed attempt is not 'reconcile effect'."""
    run = store.start_run("r11", agent_id="a", state={})
    key = f"{run.run_id}:step:plan:1:attempts"
    store.claim(key, run_id=run.run_id, worker="dead", lease=60)
    clock.advance(61)
    projector = store.projector()
    projector.catch_up()

    (row,) = projector.query("SELECT next_action FROM run_status WHERE workflow_id = 'r11'")

    assert row["next_action"] == "continue"


def test_an_effect_whose_result_cannot_be_recorded_never_runs_again(
    store: actae.Store, clock: actae.ManualClock
) -> None:
    """The effect happened: it is held for review, never re-executed, and the run fails."""
    run = store.start_run("r12", agent_id="a", state={})
    paid: list[str] = []

    def pay(key: str, token: int) -> Any:
        paid.append(key)
        return datetime(2026, 11, 30, tzinfo=UTC)  # not plain JSON

    with pytest.raises(actae.ValidationError) as refused:
        store.resume(run.run_id, worker="w").effect("pay", pay, idempotent=True)

    key = f"{run.run_id}:effect:pay:1"
    assert refused.value.field == f"effect {key!r}"
    assert store.run(run.run_id).status is actae.RunStatus.FAILED
    assert store.effect(key).status is actae.EffectStatus.NEEDS_REVIEW
    store.override(key, "completed", actor="ops", reason="paid", result="2026-11-30")
    store.retry_run(run.run_id, actor="ops", reason="result recorded by hand")

    again = store.resume(run.run_id, worker="w").effect("pay", pay, idempotent=True)

    assert (again, paid) == ("2026-11-30", [key])
