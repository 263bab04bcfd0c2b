"""Contract: every effect attempt has a deadline, and nobody acts over it before it passes.

Issue 28, item 2: a worker cut off from the database stops renewing its lease while its
provider call goes on. A takeover at the lease's end asked ``reconcile`` too early and ran
the charge again. Each attempt now has a deadline (claim time plus ``timeout``, on the
store's clock), recorded with the claim and passed to ``fn``; a takeover, reconciliation or
retry waits for it; a late answer is in doubt, never completed. Every backend, through
``Store`` and ``AsyncStore``, on a manual clock.
"""

from __future__ import annotations

import asyncio
import math
from datetime import timedelta
from typing import Any

import pytest

import actae
from tests.contract.test_projections import moment

LEASE = 6.0
TIMEOUT = 20.0
KEY = "invoice-42:charge"


@pytest.fixture
def run(store: actae.Store) -> actae.RunInfo:
    return store.start_run("invoice-42", agent_id="payer", state={})


def claim(store: actae.Store, run: actae.RunInfo, worker: str = "w1", **extra: Any) -> actae.Claim:
    return store.claim(KEY, run_id=run.run_id, worker=worker, lease=LEASE, **extra)


def must_not_run(*_: Any) -> Any:
    raise AssertionError("must not be called")


def test_the_deadline_is_recorded_with_the_claim(
    store: actae.Store, run: actae.RunInfo, clock: actae.ManualClock
) -> None:
    granted = claim(store, run, timeout=TIMEOUT)

    deadline = clock() + timedelta(seconds=TIMEOUT)
    assert granted.deadline == deadline
    info = store.effect(KEY)
    assert (info.deadline, info.attempts[0].deadline) == (deadline, deadline)
    noted = store.events(run.channel_id)[-1]
    assert (noted.kind, noted.contents()["deadline"]) == ("effect.claimed", deadline.isoformat())
    projector = store.projector()
    projector.catch_up()
    (row,) = projector.query("SELECT deadline FROM effects")
    assert moment(row["deadline"]) == deadline  # the effects read model shows it too


def test_the_default_deadline_is_the_lease(
    store: actae.Store, run: actae.RunInfo, clock: actae.ManualClock
) -> None:
    granted = claim(store, run)

    assert granted.deadline == granted.expires_at == clock() + timedelta(seconds=LEASE)


def test_fn_reads_its_attempts_deadline_and_none_outside_an_effect(
    store: actae.Store, run: actae.RunInfo, clock: actae.ManualClock
) -> None:
    seen: list[Any] = []

    def charge(key: str, token: int) -> dict[str, Any]:
        seen.append(actae.current_deadline())
        return {"charged": token}

    expected = clock() + timedelta(seconds=TIMEOUT)
    ctx = store.resume(run.run_id, worker="w1")
    assert ctx.effect("charge", charge, lease=LEASE, timeout=TIMEOUT) == {"charged": 1}

    (deadline,) = seen
    assert deadline == expected
    assert deadline.tzinfo is not None
    assert actae.current_deadline() is None


def test_no_takeover_before_the_deadline_though_the_lease_ran_out(
    store: actae.Store, run: actae.RunInfo, clock: actae.ManualClock
) -> None:
    claim(store, run, timeout=TIMEOUT)
    clock.advance(LEASE + 2)  # cut off: no heartbeat, the lease ran out at 6 s
    assert store.effect(KEY).status is actae.EffectStatus.IN_DOUBT
    before = store.events(run.channel_id)

    with pytest.raises(actae.DeadlineNotPassedError) as refused:
        claim(store, run, worker="w2")
    assert refused.value.expires_at == store.effect(KEY).deadline  # a worker retries then
    assert isinstance(refused.value, actae.LeaseHeldError)
    with pytest.raises(actae.DeadlineNotPassedError):
        store.reconcile(KEY, "failed", actor="w2", evidence={"found": False})
    with pytest.raises(actae.DeadlineNotPassedError):
        store.override(KEY, "failed", actor="ops", reason="provider says nothing happened")

    info = store.effect(KEY)
    assert (info.token, info.holder, len(info.attempts)) == (1, "w1", 1)
    assert store.events(run.channel_id) == before  # nothing reconciled, nothing claimed


def test_a_workflow_takeover_waits_for_the_deadline_then_reconciles(
    store: actae.Store, run: actae.RunInfo, clock: actae.ManualClock
) -> None:
    key = f"{run.run_id}:effect:charge:1"  # claimed as w1's ctx.effect("charge") claims it
    request = {"name": "charge"}
    store.claim(key, run_id=run.run_id, worker="w1", lease=LEASE, timeout=TIMEOUT, request=request)
    clock.advance(LEASE + 2)  # w1 is cut off inside its provider call
    asked: list[str] = []

    def reconcile(found_key: str) -> None:
        asked.append(found_key)

    with pytest.raises(actae.DeadlineNotPassedError):
        store.resume(run.run_id, worker="w2").effect(
            "charge", must_not_run, reconcile=reconcile, lease=LEASE
        )
    with pytest.raises(actae.DeadlineNotPassedError):
        store.resume(run.run_id, worker="w2").effect(
            "charge", must_not_run, idempotent=True, lease=LEASE
        )
    assert asked == []

    clock.advance(TIMEOUT - LEASE - 2)  # exactly at the deadline: the attempt is over
    result = store.resume(run.run_id, worker="w2").effect(
        "charge", lambda k, t: {"charged": t}, reconcile=reconcile, lease=LEASE
    )
    assert (result, asked) == ({"charged": 2}, [key])
    assert store.effect(key).status is actae.EffectStatus.COMPLETED


def test_heartbeats_extend_the_lease_never_the_deadline(
    store: actae.Store, run: actae.RunInfo, clock: actae.ManualClock
) -> None:
    granted = claim(store, run, timeout=TIMEOUT)
    clock.advance(TIMEOUT - 1)
    renewed = store.heartbeat(KEY, token=granted.token, worker="w1", lease=30)

    assert renewed.expires_at == clock() + timedelta(seconds=30)
    assert renewed.deadline == granted.deadline
    clock.advance(2)  # past the deadline, the lease still live
    with pytest.raises(actae.DeadlinePassedError):
        store.complete_effect(KEY, token=granted.token, worker="w1", result={"late": True})
    assert store.effect(KEY).result is None


def test_a_late_sync_answer_is_in_doubt_never_completed(
    store: actae.Store, run: actae.RunInfo, clock: actae.ManualClock
) -> None:
    key = f"{run.run_id}:effect:charge:1"

    def slow_charge(found_key: str, token: int) -> dict[str, Any]:
        clock.advance(TIMEOUT + 1)  # the provider answered after the deadline
        return {"charge_id": "ch_1"}

    with pytest.raises(actae.DeadlinePassedError):
        store.resume(run.run_id, worker="w1").effect(
            "charge", slow_charge, lease=LEASE, timeout=TIMEOUT
        )

    info = store.effect(key)
    assert (info.status, info.result) == (actae.EffectStatus.IN_DOUBT, None)
    assert (info.attempts[-1].outcome, info.holder) == ("in_doubt", "w1")
    assert store.events(run.channel_id)[-1].kind == "effect.in_doubt"
    settled = store.resume(run.run_id, worker="w2").effect(
        "charge", must_not_run, reconcile=lambda k: {"charge_id": "ch_1"}
    )
    assert settled == {"charge_id": "ch_1"}  # the doubt is settled by the provider's word


def test_an_answer_before_the_deadline_completes_though_the_lease_ran_out(
    store: actae.Store, run: actae.RunInfo, clock: actae.ManualClock
) -> None:
    granted = claim(store, run, timeout=TIMEOUT)
    clock.advance(LEASE + 2)

    done = store.complete_effect(KEY, token=granted.token, worker="w1", result={"ok": True})

    assert done.status is actae.EffectStatus.COMPLETED


@pytest.mark.parametrize(
    "timeout",
    [-1, 0, math.nan, math.inf, True, 10.0**9, "5"],
    ids=["negative", "zero", "nan", "inf", "bool", "huge", "text"],
)
def test_a_bad_timeout_is_refused_and_writes_nothing(
    store: actae.Store, run: actae.RunInfo, timeout: Any
) -> None:
    before = store.events(run.channel_id)

    with pytest.raises(actae.ValidationError) as refused:
        claim(store, run, timeout=timeout)
    assert refused.value.field == "timeout"
    with pytest.raises(actae.ValidationError) as refused:
        store.resume(run.run_id, worker="w1").effect("charge", must_not_run, timeout=timeout)
    assert refused.value.field == "timeout"

    assert store.find_effect(KEY) is None
    assert store.find_effect(f"{run.run_id}:effect:charge:1") is None
    assert store.events(run.channel_id) == before


class CountedClock(actae.ManualClock):
    """A manual clock that counts how often it was read (the deadline's watcher reads it)."""

    reads = 0

    def __call__(self) -> Any:
        self.reads += 1
        return super().__call__()


async def read_twice_more(clock: CountedClock) -> None:
    """Until the clock was read twice from now: a look at it, and the wait that followed."""
    target, deadline = clock.reads + 2, asyncio.get_running_loop().time() + 30
    while clock.reads < target:
        assert asyncio.get_running_loop().time() < deadline, "the watcher never looked"
        await asyncio.sleep(0.01)  # polling a condition (the watcher's reads), bounded


async def test_an_async_fn_is_cancelled_at_its_deadline(store_url: str) -> None:
    clock = CountedClock()
    async with actae.open_async(store_url, clock=clock) as store:
        run = await store.start_run("wf", agent_id="agent", state={})
        ctx = await store.resume(run.run_id, worker="w1")
        started, cancelled = asyncio.Event(), asyncio.Event()

        async def charge(key: str, token: int) -> dict[str, Any]:
            assert actae.current_deadline() == (await store.effect(key)).deadline
            started.set()
            try:
                await asyncio.Event().wait()  # the provider never answers
            except asyncio.CancelledError:
                cancelled.set()
                raise
            raise AssertionError("unreachable")

        attempt = asyncio.create_task(ctx.effect("charge", charge, lease=30, timeout=TIMEOUT))
        await started.wait()
        clock.advance(TIMEOUT - 1)
        await read_twice_more(clock)  # the watcher saw the clock short of the deadline
        assert not cancelled.is_set()
        assert not attempt.done()
        clock.advance(1)
        with pytest.raises(actae.DeadlinePassedError):
            await asyncio.wait_for(attempt, timeout=30)
        assert cancelled.is_set()
        info = await store.effect(f"{run.run_id}:effect:charge:1")
        assert (info.status, info.result) == (actae.EffectStatus.IN_DOUBT, None)
        assert info.attempts[-1].outcome == "in_doubt"


def test_a_retried_steps_attempt_counter_has_no_deadline(
    store: actae.Store, run: actae.RunInfo, clock: actae.ManualClock
) -> None:
    """Not a side effect: a slow model call may outlast the counter's lease and still count."""
    calls: list[int] = []

    def flaky_then_slow_model() -> str:
        calls.append(len(calls))
        if len(calls) == 1:
            raise TimeoutError("the model is busy")  # the ledger counts attempts from now on
        clock.advance(3600)  # the second attempt takes far longer than the counter's lease
        return "plan"

    policy = actae.RetryPolicy(initial_delay=1.0)
    with pytest.raises(actae.RetryNotDueError):
        store.resume(run.run_id, worker="w1").step("plan", flaky_then_slow_model, retry=policy)
    clock.advance(2)
    ctx = store.resume(run.run_id, worker="w1")
    assert ctx.step("plan", flaky_then_slow_model, retry=policy) == "plan"

    assert calls == [0, 1]
    assert store.recover(run.channel_id).outstanding == []  # counted, not left in doubt


def test_a_failure_at_the_deadline_is_in_doubt_and_never_retried_blind(
    store: actae.Store, run: actae.RunInfo, clock: actae.ManualClock
) -> None:
    key = f"{run.run_id}:effect:charge:1"

    def timing_out(found_key: str, token: int) -> dict[str, Any]:
        clock.advance(TIMEOUT)  # the client gave up at the deadline: the call may have landed
        raise TimeoutError("read timed out")

    with pytest.raises(actae.DeadlinePassedError):
        store.resume(run.run_id, worker="w1").effect(
            "charge", timing_out, lease=LEASE, timeout=TIMEOUT
        )

    info = store.effect(key)
    assert (info.status, info.attempts[-1].outcome) == (actae.EffectStatus.IN_DOUBT, "in_doubt")
    asked: list[str] = []

    def reconcile(found_key: str) -> dict[str, Any]:
        asked.append(found_key)
        return {"charge_id": "ch_1"}

    settled = store.resume(run.run_id, worker="w2").effect(
        "charge", must_not_run, reconcile=reconcile
    )
    assert (settled, asked) == ({"charge_id": "ch_1"}, [key])  # the provider was asked first


def test_a_failure_to_retry_is_refused_at_the_deadline_but_a_final_one_is_kept(
    store: actae.Store, run: actae.RunInfo, clock: actae.ManualClock
) -> None:
    granted = claim(store, run, timeout=TIMEOUT)
    clock.advance(TIMEOUT)

    with pytest.raises(actae.DeadlinePassedError):
        store.fail_effect(KEY, token=granted.token, worker="w1", error="timed out")
    assert store.effect(KEY).attempts[-1].outcome != "failed"  # nothing written

    info = store.fail_effect(KEY, token=granted.token, worker="w1", error="gave up", final=True)
    assert info.status is actae.EffectStatus.NEEDS_REVIEW


def test_a_repeated_doubt_is_answered_from_the_store_and_written_once(
    store: actae.Store, run: actae.RunInfo
) -> None:
    granted = claim(store, run, timeout=TIMEOUT)
    first = store.doubt_effect(KEY, token=granted.token, worker="w1", reason="answered late")
    written = len(store.events(run.channel_id))

    again = store.doubt_effect(KEY, token=granted.token, worker="w1", reason="answered late")

    assert (again.status, again.attempts) == (first.status, first.attempts)
    assert len(store.events(run.channel_id)) == written  # no second note, no second Doubted
