"""Contract: durable steps and guarded effects through RunContext (every backend)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest

import actae


class ProviderError(Exception):
    """An HTTP error from a provider, with its Retry-After."""

    def __init__(self, status: int, retry_after: float | None = None) -> None:
        super().__init__(f"HTTP {status}")
        self.retry_after = retry_after


@pytest.fixture
def run(store: actae.Store) -> actae.RunInfo:
    return store.start_run("invoice-42", agent_id="payer", state={"step": 0})


def must_not_run(*_: Any) -> Any:
    pytest.fail("a recorded step or effect ran again")


def test_step_runs_once_and_replays_its_recorded_value(
    store: actae.Store, run: actae.RunInfo
) -> None:
    first = store.resume(run.run_id, worker="w1")
    values = [first.step("sample", random.random), first.step("sample", random.random)]
    first.transition(state={"step": 1})

    again = store.resume(run.run_id, worker="w2")

    assert [again.step("sample", must_not_run), again.step("sample", must_not_run)] == values
    assert again.transition(state={"step": 1}).replayed
    assert again.step("next", lambda: "new") == "new"
    kinds = [e.kind for e in store.events(run.channel_id)]
    assert kinds == ["run.started", "step.result", "step.result", "transition", "step.result"]


def test_effect_runs_once_with_key_and_token(store: actae.Store, run: actae.RunInfo) -> None:
    seen: list[tuple[str, int]] = []

    def pay(key: str, token: int) -> dict[str, Any]:
        seen.append((key, token))
        return {"charge_id": "ch_1"}

    ctx = store.resume(run.run_id, worker="w1")
    assert ctx.effect("charge", pay) == {"charge_id": "ch_1"}
    assert store.resume(run.run_id, worker="w2").effect("charge", must_not_run) == {
        "charge_id": "ch_1"
    }
    assert seen == [(f"{run.run_id}:effect:charge:1", 1)]
    assert [e.kind for e in store.events(run.channel_id)][-2:] == [
        "effect.claimed",
        "effect.completed",
    ]
    ctx.transition(state={"step": 1})  # the context tracked the ledger's channel notes


def test_provider_retry_after_is_honoured_on_the_virtual_clock(
    store: actae.Store, run: actae.RunInfo, clock: actae.ManualClock
) -> None:
    attempts: list[datetime] = []

    def pay(key: str, token: int) -> dict[str, Any]:
        attempts.append(clock())
        if len(attempts) == 1:
            raise ProviderError(429, retry_after=30.0)
        return {"charge_id": "ch_1", "token": token}

    policy = actae.RetryPolicy(initial_delay=1.0)
    with pytest.raises(actae.RetryNotDueError) as caught:
        store.resume(run.run_id, worker="w1").effect("charge", pay, retry=policy)
    assert caught.value.wait == pytest.approx(30.0)
    assert store.recover(run.channel_id).outstanding[0].status is (
        actae.EffectStatus.RETRY_SCHEDULED
    )

    clock.advance(29.9)
    with pytest.raises(actae.RetryNotDueError):
        store.resume(run.run_id, worker="w1").effect("charge", pay, retry=policy)
    assert len(attempts) == 1

    clock.advance(0.1)
    result = store.resume(run.run_id, worker="w1").effect("charge", pay, retry=policy)

    assert result == {"charge_id": "ch_1", "token": 2}
    assert (attempts[1] - attempts[0]).total_seconds() >= 30.0


def test_exhausted_retries_block_the_effect(
    store: actae.Store, run: actae.RunInfo, clock: actae.ManualClock
) -> None:
    def always_down(key: str, token: int) -> None:
        raise ProviderError(503)

    policy = actae.RetryPolicy(max_attempts=2, initial_delay=1.0)
    with pytest.raises(actae.RetryNotDueError):
        store.resume(run.run_id, worker="w").effect("charge", always_down, retry=policy)
    clock.advance(5)
    with pytest.raises(actae.EffectBlockedError) as caught:
        store.resume(run.run_id, worker="w").effect("charge", always_down, retry=policy)

    assert caught.value.status == "needs_review"
    assert "HTTP 503" in (store.recover(run.channel_id).outstanding[0].last_error or "")


def test_in_doubt_effect_without_reconcile_stops_for_review(
    store: actae.Store,
    run: actae.RunInfo,
    clock: actae.ManualClock,
    in_doubt: Callable[[actae.RunInfo, str], str],
) -> None:
    key = in_doubt(run, "charge")

    with pytest.raises(actae.EffectBlockedError):
        store.resume(run.run_id, worker="w2").effect("charge", must_not_run)

    assert store.effect(key).status is actae.EffectStatus.NEEDS_REVIEW


def test_in_doubt_idempotent_effect_is_retried_under_the_same_key(
    store: actae.Store,
    run: actae.RunInfo,
    clock: actae.ManualClock,
    in_doubt: Callable[[actae.RunInfo, str], str],
) -> None:
    key = in_doubt(run, "charge")
    keys: list[str] = []

    def pay(key: str, token: int) -> dict[str, Any]:
        keys.append(key)
        return {"ok": True}

    result = store.resume(run.run_id, worker="w2").effect("charge", pay, idempotent=True)

    assert (result, keys) == ({"ok": True}, [key])


def test_in_doubt_effect_found_by_reconcile_is_not_run(
    store: actae.Store,
    run: actae.RunInfo,
    clock: actae.ManualClock,
    in_doubt: Callable[[actae.RunInfo, str], str],
) -> None:
    key = in_doubt(run, "charge")

    result = store.resume(run.run_id, worker="w2").effect(
        "charge", must_not_run, reconcile=lambda k: {"charge_id": f"found:{k}"}
    )

    assert result == {"charge_id": f"found:{key}"}


def test_in_doubt_effect_not_found_by_reconcile_runs_under_the_same_claim(
    store: actae.Store,
    run: actae.RunInfo,
    clock: actae.ManualClock,
    in_doubt: Callable[[actae.RunInfo, str], str],
) -> None:
    in_doubt(run, "charge")

    result = store.resume(run.run_id, worker="w2").effect(
        "charge", lambda k, t: {"token": t}, reconcile=lambda k: None
    )

    assert result == {"token": 2}


def test_effect_heartbeats_while_the_provider_is_slow(store_url: str) -> None:
    with actae.open(store_url) as wall:
        run = wall.start_run("slow", agent_id="a", state={})

        def slow_provider(key: str, token: int) -> dict[str, Any]:
            granted = wall.effect(key).expires_at
            assert granted is not None
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:  # wait for the condition: the lease moved
                current = wall.effect(key).expires_at
                if current is not None and current > granted:
                    return {"renewed": True}
                time.sleep(0.01)
            return {"renewed": False}

        resumed = wall.resume(run.run_id, worker="w")  # a deadline past the renewal it waits for
        result = resumed.effect("charge", slow_provider, lease=0.3, timeout=60)

    assert result == {"renewed": True}
