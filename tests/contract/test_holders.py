"""Only the worker a claim was granted to may heartbeat, complete or fail it.

A fencing token is no secret (``store.effect`` shows it to anyone), so the ledger's worker
verbs take the caller's name too and refuse any name but the holder's, writing nothing.
``abandon`` is an operator's verb and needs no claim.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import actae

KEY = "invoice-42:charge"
LEASE = 30.0


def snapshot(store: actae.Store, run: actae.RunInfo) -> tuple[Any, ...]:
    return store.effect(KEY), store.events(run.channel_id)


@pytest.fixture
def run(store: actae.Store) -> actae.RunInfo:
    return store.start_run("billing", agent_id="a", state={})


def verbs(store: actae.Store, token: int, worker: str) -> dict[str, Callable[[], object]]:
    return {
        "heartbeat": lambda: store.heartbeat(KEY, token=token, worker=worker, lease=LEASE),
        "complete": lambda: store.complete_effect(
            KEY, token=token, worker=worker, result={"id": 1}
        ),
        "fail": lambda: store.fail_effect(KEY, token=token, worker=worker, error="HTTP 503"),
    }


@pytest.mark.parametrize("verb", ["heartbeat", "complete", "fail"])
def test_another_worker_with_the_current_token_is_refused_and_nothing_is_written(
    store: actae.Store, run: actae.RunInfo, verb: str
) -> None:
    granted = store.claim(KEY, run_id=run.run_id, worker="w1", lease=LEASE)
    before = snapshot(store, run)

    with pytest.raises(actae.NotHolderError) as refused:
        verbs(store, granted.token, "intruder")[verb]()

    assert isinstance(refused.value, actae.FencingError)  # handled like any fenced call
    assert (refused.value.worker, refused.value.holder) == ("intruder", "w1")
    assert "'w1'" in str(refused.value)
    assert "'intruder'" in str(refused.value)
    assert snapshot(store, run) == before
    verbs(store, granted.token, "w1")[verb]()  # the holder itself goes on


def test_a_completed_effect_answers_its_own_holder_and_refuses_others(
    store: actae.Store, run: actae.RunInfo
) -> None:
    granted = store.claim(KEY, run_id=run.run_id, worker="w1", lease=LEASE)
    done = store.complete_effect(KEY, token=granted.token, worker="w1", result={"id": 1})
    before = snapshot(store, run)

    with pytest.raises(actae.NotHolderError):
        store.complete_effect(KEY, token=granted.token, worker="w2", result={"id": 1})
    assert store.complete_effect(KEY, token=granted.token, worker="w1", result={"id": 1}) == done
    assert snapshot(store, run) == before


def test_a_later_claim_holder_cannot_use_an_earlier_holders_name(
    store: actae.Store, run: actae.RunInfo, clock: actae.ManualClock
) -> None:
    store.claim(KEY, run_id=run.run_id, worker="w1", lease=LEASE)
    clock.advance(LEASE + 1)
    second = store.claim(KEY, run_id=run.run_id, worker="w2", lease=LEASE)

    with pytest.raises(actae.NotHolderError):
        store.complete_effect(KEY, token=second.token, worker="w1", result={"id": 1})
    with pytest.raises(actae.FencingError):  # and the earlier token is stale
        store.complete_effect(KEY, token=second.token - 1, worker="w1", result={"id": 1})
    store.complete_effect(KEY, token=second.token, worker="w2", result={"id": 1})


def test_a_missing_worker_name_is_a_validation_error(
    store: actae.Store, run: actae.RunInfo
) -> None:
    granted = store.claim(KEY, run_id=run.run_id, worker="w1", lease=LEASE)
    before = snapshot(store, run)
    for call in verbs(store, granted.token, "").values():
        with pytest.raises(actae.ValidationError) as refused:
            call()
        assert refused.value.field == "worker"
    assert snapshot(store, run) == before


def test_an_operator_abandons_without_the_claim_and_fences_the_holder(
    store: actae.Store, run: actae.RunInfo
) -> None:
    granted = store.claim(KEY, run_id=run.run_id, worker="w1", lease=LEASE)

    info = store.abandon(KEY, actor="ops", reason="the customer cancelled")

    assert info.status is actae.EffectStatus.ABANDONED
    with pytest.raises(actae.EffectBlockedError):
        store.complete_effect(KEY, token=granted.token, worker="w1", result={"id": 1})
