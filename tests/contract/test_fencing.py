"""Contract: the ledger's fences and boundaries, exactly (every backend, manual clock).

``test_ledger.py`` shows the happy paths and the stale holder. These pin the edges a
weakened guard would slip through: a token the ledger never issued, the instant a lease runs
out, a current token whose attempt is already settled, the retry schedule to the second.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

import actae

KEY = "invoice-42:charge"
LEASE = 30.0


@pytest.fixture
def run(store: actae.Store) -> actae.RunInfo:
    return store.start_run("invoice-42", agent_id="payer", state={})


def claim(store: actae.Store, run: actae.RunInfo, worker: str = "w1", **extra: Any) -> actae.Claim:
    return store.claim(KEY, run_id=run.run_id, worker=worker, lease=LEASE, **extra)


def snapshot(store: actae.Store, run: actae.RunInfo) -> tuple[Any, ...]:
    return store.effect(KEY), store.events(run.channel_id)


def test_a_token_above_the_current_one_is_fenced_and_changes_nothing(
    store: actae.Store, run: actae.RunInfo
) -> None:
    """Only the token the ledger issued last holds the claim, not any larger number."""
    granted = claim(store, run)
    before = snapshot(store, run)
    forged = granted.token + 1

    calls: list[Callable[[], object]] = [
        lambda: store.complete_effect(
            KEY, token=forged, worker="w1", result={"charge_id": "forged"}
        ),
        lambda: store.heartbeat(KEY, token=forged, worker="w1", lease=LEASE),
        lambda: store.fail_effect(KEY, token=forged, worker="w1", error="timeout"),
        lambda: store.reconcile(KEY, "completed", actor="w9", token=forged),
    ]
    for call in calls:
        with pytest.raises(actae.FencingError) as caught:
            call()
        assert (caught.value.presented_token, caught.value.current_token) == (2, 1)

    assert snapshot(store, run) == before
    done = store.complete_effect(
        KEY, token=granted.token, worker="w1", result={"charge_id": "ch_1"}
    )
    assert done.status is actae.EffectStatus.COMPLETED


def test_a_lease_is_live_until_its_expiry_and_in_doubt_from_that_instant(
    store: actae.Store, run: actae.RunInfo, clock: actae.ManualClock
) -> None:
    granted = claim(store, run)
    assert granted.expires_at == clock() + timedelta(seconds=LEASE)

    clock.advance(LEASE - 0.001)
    live = store.effect(KEY)
    assert (live.status, live.in_doubt) == (actae.EffectStatus.CLAIMED, False)
    with pytest.raises(actae.LeaseHeldError):
        claim(store, run, worker="w2")

    clock.advance(0.001)  # now == expires_at
    doubtful = store.effect(KEY)
    assert (doubtful.status, doubtful.in_doubt) == (actae.EffectStatus.IN_DOUBT, True)
    (outstanding,) = store.recover(run.channel_id).outstanding
    assert (outstanding.status, outstanding.in_doubt) == (actae.EffectStatus.IN_DOUBT, True)
    second = claim(store, run, worker="w2")
    assert (second.status, second.token, second.in_doubt) == ("granted", 2, True)


def test_the_current_token_cannot_settle_an_attempt_that_is_already_settled(
    store: actae.Store, run: actae.RunInfo
) -> None:
    """After a failure the token is still the newest, but it holds no claim any more."""
    granted = claim(store, run)
    store.fail_effect(KEY, token=granted.token, worker="w1", error="HTTP 503")
    before = snapshot(store, run)

    calls: list[Callable[[], object]] = [
        lambda: store.complete_effect(
            KEY, token=granted.token, worker="w1", result={"charge_id": "late"}
        ),
        lambda: store.heartbeat(KEY, token=granted.token, worker="w1", lease=LEASE),
        lambda: store.fail_effect(KEY, token=granted.token, worker="w1", error="again"),
    ]
    for call in calls:
        with pytest.raises(actae.EffectBlockedError) as caught:
            call()
        assert caught.value.status == "retry_scheduled"

    assert snapshot(store, run) == before


def test_a_completed_effect_cannot_be_failed_or_abandoned(
    store: actae.Store, run: actae.RunInfo
) -> None:
    granted = claim(store, run)
    store.complete_effect(KEY, token=granted.token, worker="w1", result={"charge_id": "ch_1"})
    before = snapshot(store, run)

    with pytest.raises(actae.EffectBlockedError) as failing:
        store.fail_effect(KEY, token=granted.token, worker="w1", error="oops")
    with pytest.raises(actae.EffectBlockedError) as abandoning:
        store.abandon(KEY, actor="ops", reason="tidy up")

    assert (failing.value.status, abandoning.value.status) == ("completed", "completed")
    assert snapshot(store, run) == before


def test_retries_follow_the_policy_to_the_second(
    store: actae.Store, run: actae.RunInfo, clock: actae.ManualClock
) -> None:
    """With the jitter fixed at 0.5: waits of 15 s, 30 s, then review after 3 attempts."""
    store._service.core.draw = lambda: 0.5
    policy = {"max_attempts": 3, "initial_delay": 30.0, "max_delay": 300.0, "max_total": 600.0}
    expected_waits = [15.0, 30.0]

    for wait in expected_waits:
        granted = claim(store, run, retry=policy)
        info = store.fail_effect(KEY, token=granted.token, worker="w1", error="HTTP 503")
        assert info.retry_at == clock() + timedelta(seconds=wait)
        clock.advance(wait)
    granted = claim(store, run, retry=policy)
    info = store.fail_effect(KEY, token=granted.token, worker="w1", error="HTTP 503")

    assert (info.status, info.retry_at, granted.attempt) == (
        actae.EffectStatus.NEEDS_REVIEW,
        None,
        3,
    )


def test_a_retry_after_longer_than_the_backoff_wins(
    store: actae.Store, run: actae.RunInfo, clock: actae.ManualClock
) -> None:
    store._service.core.draw = lambda: 0.5
    granted = claim(store, run)

    info = store.fail_effect(
        KEY, token=granted.token, worker="w1", error="HTTP 429", retry_after=100.0
    )

    assert info.retry_at == clock() + timedelta(seconds=100)
