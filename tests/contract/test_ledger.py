"""Contract: the tool-execution ledger on every backend, on a manual clock."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

import actae

LEASE = 30.0


@pytest.fixture
def ledger(store: actae.Store) -> actae.Store:
    return store


@pytest.fixture
def run(ledger: actae.Store) -> actae.RunInfo:
    return ledger.start_run("invoice-42", agent_id="payer", state={})


def claim(store: actae.Store, run: actae.RunInfo, worker: str = "w1", **extra: Any) -> actae.Claim:
    return store.claim(
        "invoice-42:charge",
        run_id=run.run_id,
        worker=worker,
        lease=LEASE,
        request={"amount": 100},
        **extra,
    )


def test_first_claim_is_granted_and_noted_on_the_run(
    ledger: actae.Store, run: actae.RunInfo, clock: actae.ManualClock
) -> None:
    granted = claim(ledger, run)

    assert (granted.status, granted.token, granted.attempt, granted.in_doubt) == (
        "granted",
        1,
        1,
        False,
    )
    assert granted.expires_at == clock() + timedelta(seconds=LEASE)
    last = ledger.events(run.channel_id)[-1]
    assert (last.kind, last.contents()["effect_key"], last.contents()["token"]) == (
        "effect.claimed",
        "invoice-42:charge",
        1,
    )
    (open_effect,) = ledger.recover(run.channel_id).outstanding
    assert (open_effect.effect_key, open_effect.status) == (
        "invoice-42:charge",
        actae.EffectStatus.CLAIMED,
    )


def test_a_live_lease_refuses_other_claims(ledger: actae.Store, run: actae.RunInfo) -> None:
    granted = claim(ledger, run)

    with pytest.raises(actae.LeaseHeldError) as caught:
        claim(ledger, run, worker="w2")

    assert (caught.value.holder, caught.value.expires_at) == ("w1", granted.expires_at)
    assert ledger.effect("invoice-42:charge").attempt == 1


def test_heartbeat_extends_the_lease(
    ledger: actae.Store, run: actae.RunInfo, clock: actae.ManualClock
) -> None:
    granted = claim(ledger, run)
    clock.advance(20)
    ledger.heartbeat("invoice-42:charge", token=granted.token, worker="w1", lease=LEASE)
    clock.advance(20)

    with pytest.raises(actae.LeaseHeldError):
        claim(ledger, run, worker="w2")


def test_completed_effect_returns_its_result_and_is_never_granted_again(
    ledger: actae.Store, run: actae.RunInfo, clock: actae.ManualClock
) -> None:
    granted = claim(ledger, run)
    ledger.complete_effect(
        "invoice-42:charge", token=granted.token, worker="w1", result={"charge_id": "ch_1"}
    )
    clock.advance(3600)

    again = claim(ledger, run, worker="w2")

    assert (again.status, again.result) == ("completed", {"charge_id": "ch_1"})
    assert ledger.recover(run.channel_id).outstanding == []
    assert ledger.events(run.channel_id)[-1].kind == "effect.completed"
    repeat = ledger.complete_effect(
        "invoice-42:charge", token=1, worker="w1", result={"charge_id": "ch_1"}
    )
    assert repeat.status is actae.EffectStatus.COMPLETED
    with pytest.raises(actae.OperationConflictError):
        ledger.complete_effect(
            "invoice-42:charge", token=1, worker="w1", result={"charge_id": "ch_2"}
        )


def test_expired_lease_is_in_doubt_and_the_next_claim_says_so(
    ledger: actae.Store, run: actae.RunInfo, clock: actae.ManualClock
) -> None:
    claim(ledger, run)
    clock.advance(LEASE + 1)

    assert ledger.effect("invoice-42:charge").status is actae.EffectStatus.IN_DOUBT
    second = claim(ledger, run, worker="w2")

    assert (second.status, second.token, second.attempt, second.in_doubt) == ("granted", 2, 2, True)
    history = ledger.effect("invoice-42:charge").attempts
    assert [(a.worker, a.token, a.outcome) for a in history] == [
        ("w1", 1, "expired"),
        ("w2", 2, None),
    ]


def test_stale_tokens_are_fenced_and_change_nothing(
    ledger: actae.Store, run: actae.RunInfo, clock: actae.ManualClock
) -> None:
    claim(ledger, run)
    clock.advance(LEASE + 1)
    claim(ledger, run, worker="w2")
    before = (ledger.effect("invoice-42:charge"), ledger.events(run.channel_id))

    calls: list[Callable[[], object]] = [
        lambda: ledger.complete_effect(
            "invoice-42:charge", token=1, worker="w1", result={"charge_id": "late"}
        ),
        lambda: ledger.heartbeat("invoice-42:charge", token=1, worker="w1", lease=LEASE),
        lambda: ledger.fail_effect("invoice-42:charge", token=1, worker="w1", error="timeout"),
        lambda: ledger.reconcile("invoice-42:charge", "completed", actor="w1", token=1),
    ]
    for call in calls:
        with pytest.raises(actae.FencingError) as caught:
            call()
        assert (caught.value.presented_token, caught.value.current_token) == (1, 2)

    assert (ledger.effect("invoice-42:charge"), ledger.events(run.channel_id)) == before


def test_failure_schedules_a_retry_that_cannot_start_early(
    ledger: actae.Store, run: actae.RunInfo, clock: actae.ManualClock
) -> None:
    first = claim(ledger, run, retry={"initial_delay": 1.0})
    info = ledger.fail_effect(
        "invoice-42:charge", token=first.token, worker="w1", error="HTTP 429", retry_after=30.0
    )
    assert info.status is actae.EffectStatus.RETRY_SCHEDULED
    assert info.retry_at == clock() + timedelta(seconds=30)

    clock.advance(29)
    with pytest.raises(actae.RetryNotDueError) as caught:
        claim(ledger, run, retry={"initial_delay": 1.0})
    assert caught.value.wait == pytest.approx(1.0)

    clock.advance(1)
    second = claim(ledger, run, retry={"initial_delay": 1.0})
    assert (second.token, second.attempt, second.in_doubt) == (2, 2, False)


def test_exhausted_retries_need_review_and_block_claims(
    ledger: actae.Store, run: actae.RunInfo, clock: actae.ManualClock
) -> None:
    policy = {"max_attempts": 2, "initial_delay": 1.0}
    for _ in range(2):
        granted = claim(ledger, run, retry=policy)
        info = ledger.fail_effect(
            "invoice-42:charge", token=granted.token, worker="w1", error="HTTP 500"
        )
        clock.advance(60)

    assert info.status is actae.EffectStatus.NEEDS_REVIEW
    with pytest.raises(actae.EffectBlockedError) as caught:
        claim(ledger, run, retry=policy)
    assert caught.value.status == "needs_review"
    (outstanding,) = ledger.recover(run.channel_id).outstanding
    assert outstanding.status is actae.EffectStatus.NEEDS_REVIEW


def test_reconcile_settles_an_effect_in_doubt(
    ledger: actae.Store, run: actae.RunInfo, clock: actae.ManualClock
) -> None:
    claim(ledger, run)
    with pytest.raises(actae.LeaseHeldError):
        ledger.reconcile("invoice-42:charge", "completed", actor="ops")
    clock.advance(LEASE + 1)

    info = ledger.reconcile(
        "invoice-42:charge",
        "completed",
        actor="ops",
        evidence={"provider_charge": "ch_9"},
        result={"charge_id": "ch_9"},
    )

    assert info.status is actae.EffectStatus.COMPLETED
    assert claim(ledger, run, worker="w3").result == {"charge_id": "ch_9"}
    last = ledger.events(run.channel_id)[-1]
    assert (last.kind, last.contents()["actor"]) == ("effect.reconciled", "ops")


def test_reconcile_failed_with_the_token_keeps_the_claim(
    ledger: actae.Store, run: actae.RunInfo, clock: actae.ManualClock
) -> None:
    claim(ledger, run)
    clock.advance(LEASE + 1)
    doubtful = claim(ledger, run, worker="w2")

    ledger.reconcile(
        "invoice-42:charge",
        "failed",
        actor="w2",
        token=doubtful.token,
        evidence={"provider": "no such charge"},
    )
    info = ledger.complete_effect(
        "invoice-42:charge", token=doubtful.token, worker="w2", result={"charge_id": "c"}
    )

    assert info.status is actae.EffectStatus.COMPLETED
    assert [a.outcome for a in info.attempts] == ["expired", "completed"]


def test_abandon_closes_the_effect(ledger: actae.Store, run: actae.RunInfo) -> None:
    granted = claim(ledger, run)
    ledger.fail_effect(
        "invoice-42:charge", token=granted.token, worker="w1", error="card declined", final=True
    )

    info = ledger.abandon("invoice-42:charge", actor="ops", reason="customer cancelled")

    assert info.status is actae.EffectStatus.ABANDONED
    assert ledger.recover(run.channel_id).outstanding == []
    with pytest.raises(actae.EffectBlockedError):
        claim(ledger, run)


def test_one_key_one_request(ledger: actae.Store, run: actae.RunInfo) -> None:
    ledger.record(run.channel_id, kind="k", payload={}, expected_cursor=1, operation_id="op-1")
    claim(ledger, run)

    with pytest.raises(actae.OperationConflictError):
        ledger.claim(
            "invoice-42:charge", run_id=run.run_id, worker="w", lease=LEASE, request={"amount": 999}
        )
    with pytest.raises(actae.OperationConflictError):
        ledger.claim("op-1", run_id=run.run_id, worker="w", lease=LEASE)
    with pytest.raises(actae.NotFoundError):
        ledger.complete_effect("op-1", token=1, worker="w1", result={})


def test_bad_ledger_input_is_refused_and_writes_nothing(
    ledger: actae.Store, run: actae.RunInfo
) -> None:
    granted = claim(ledger, run)
    before = (ledger.effect("invoice-42:charge"), ledger.events(run.channel_id))
    key = "invoice-42:charge"

    cases: list[tuple[str, Callable[[], object]]] = [
        ("lease", lambda: ledger.claim("k2", run_id=run.run_id, worker="w", lease=0)),
        ("worker", lambda: ledger.claim("k2", run_id=run.run_id, worker="", lease=1)),
        ("run_id", lambda: ledger.claim("k2", run_id="nope", worker="w", lease=1)),
        (
            "retry",
            lambda: ledger.claim(
                "k2", run_id=run.run_id, worker="w", lease=1, retry={"max_attempts": 0}
            ),
        ),
        (
            "request",
            lambda: ledger.claim(
                "k2",
                run_id=run.run_id,
                worker="w",
                lease=1,
                request=[1],  # type: ignore[arg-type]
            ),
        ),
        ("token", lambda: ledger.complete_effect(key, token=0, worker="w1", result={})),
        (
            "result",
            lambda: ledger.complete_effect(
                key,
                token=granted.token,
                worker="w1",
                result="ok",  # type: ignore[arg-type]
            ),
        ),
        (
            "retry_after",
            lambda: ledger.fail_effect(
                key, token=granted.token, worker="w1", error="e", retry_after=-1
            ),
        ),
        ("outcome", lambda: ledger.reconcile(key, "maybe", actor="ops")),
        ("effect_key", lambda: ledger.effect("")),
    ]
    for field, call in cases:
        with pytest.raises(actae.ValidationError) as caught:
            call()
        assert caught.value.field == field

    assert (ledger.effect(key), ledger.events(run.channel_id)) == before
    with pytest.raises(actae.NotFoundError):
        ledger.claim("k3", run_id="00000000-0000-4000-8000-000000000000", worker="w", lease=1)


def test_claim_and_channel_note_commit_together(
    store_url: str, ledger: actae.Store, run: actae.RunInfo
) -> None:
    """A claim whose channel note loses a race is not half-saved: it is re-decided whole."""
    service = ledger._service
    original_save = service.save
    raced: list[bool] = []

    def save_after_a_rival_wrote(*aggregates: Any, **kwargs: Any) -> Any:
        if not raced:
            raced.append(True)
            head = ledger.head(run.channel_id)
            ledger.record(run.channel_id, kind="rival", payload={}, expected_cursor=head.cursor)
        return original_save(*aggregates, **kwargs)

    service.save = save_after_a_rival_wrote  # type: ignore[method-assign]
    try:
        granted = claim(ledger, run)
    finally:
        service.save = original_save  # type: ignore[method-assign]

    assert (granted.token, granted.attempt) == (1, 1)
    assert [a.token for a in ledger.effect("invoice-42:charge").attempts] == [1]
    kinds = [e.kind for e in ledger.events(run.channel_id)]
    assert kinds == ["run.started", "rival", "effect.claimed"]


def test_run_status_derives_retrying_and_blocked_from_its_effects(
    ledger: actae.Store, run: actae.RunInfo, clock: actae.ManualClock
) -> None:
    policy = {"max_attempts": 2, "initial_delay": 1.0}
    granted = claim(ledger, run, retry=policy)
    assert ledger.run(run.run_id).status is actae.RunStatus.RUNNING

    ledger.fail_effect("invoice-42:charge", token=granted.token, worker="w1", error="HTTP 503")
    assert ledger.run(run.run_id).status is actae.RunStatus.RETRYING

    clock.advance(5)
    granted = claim(ledger, run, retry=policy)
    ledger.fail_effect("invoice-42:charge", token=granted.token, worker="w1", error="HTTP 503")
    assert ledger.run(run.run_id).status is actae.RunStatus.BLOCKED

    ledger.abandon("invoice-42:charge", actor="ops", reason="gave up")
    assert ledger.run(run.run_id).status is actae.RunStatus.RUNNING


def test_an_effect_needing_review_outranks_one_retrying_in_the_run_status(
    ledger: actae.Store, run: actae.RunInfo
) -> None:
    """Blocked, not retrying: the retry would move on by itself, the review needs a person."""
    reviewed = ledger.claim("refund", run_id=run.run_id, worker="w1", lease=LEASE)
    ledger.fail_effect("refund", token=reviewed.token, worker="w1", error="HTTP 400", final=True)
    retried = claim(ledger, run, retry={"max_attempts": 3, "initial_delay": 60.0})
    ledger.fail_effect("invoice-42:charge", token=retried.token, worker="w1", error="HTTP 503")

    assert ledger.run(run.run_id).status is actae.RunStatus.BLOCKED
    projector = ledger.projector()
    projector.catch_up()
    (row,) = projector.query("SELECT status FROM run_status")
    assert row["status"] == "blocked"


def test_retries_stop_at_the_total_time_cap(ledger: actae.Store, run: actae.RunInfo) -> None:
    granted = claim(ledger, run, retry={"max_total": 20.0, "initial_delay": 1.0})

    info = ledger.fail_effect(
        "invoice-42:charge", token=granted.token, worker="w1", error="429", retry_after=30.0
    )

    assert info.status is actae.EffectStatus.NEEDS_REVIEW
    assert info.retry_at is None


def test_a_claim_finds_a_run_whose_channel_is_not_where_new_runs_put_it(
    durable_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run's channel is the one its start recorded; ``Run.channel_for`` is only a guess."""
    from uuid import uuid4

    from actae.domain.run import Run

    with monkeypatch.context() as patched, actae.open(durable_url) as store:
        patched.setattr(Run, "channel_for", staticmethod(lambda _run_id: uuid4()))
        run = store.start_run("w", agent_id="x", state={})
    with actae.open(durable_url) as store:  # a process that knows nothing of the run
        claim = store.claim("charge", run_id=run.run_id, worker="w", lease=LEASE, request={})
        assert claim.status == "granted"
        assert [e.effect_key for e in store.recover(run.channel_id).outstanding] == ["charge"]
        with pytest.raises(actae.NotFoundError):
            store.claim("other", run_id=run.channel_id, worker="w", lease=LEASE)
