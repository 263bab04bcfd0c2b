"""Operator actions say exactly what they did: overrides, approvals, signals.

An override's result is what the workflow sees when it goes on; an approval for a wait the
run is not in is refused instead of being filed where nothing will ever read it.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

import actae


def _send_workflow(sent: list[str]) -> Callable[[actae.RunContext], dict[str, object]]:
    def workflow(ctx: actae.RunContext) -> dict[str, object]:
        def send(key: str, token: int) -> dict[str, str]:
            sent.append(key)
            return {"message_id": "m-from-fn"}

        receipt = ctx.effect("send", send)
        return {"receipt": receipt}

    return workflow


def test_an_override_result_is_what_the_workflow_sees(
    store: actae.Store, in_doubt: Callable[[actae.RunInfo, str], str]
) -> None:
    run = store.start_run("ovr", agent_id="mailer", state={})
    key = in_doubt(run, "send")
    store.override(
        key,
        "completed",
        actor="ops",
        reason="the provider's dashboard shows the message",
        evidence={"dashboard": "msg m-1"},
        result={"message_id": "m-1"},
    )
    sent: list[str] = []

    result = _send_workflow(sent)(store.resume(run.run_id, worker="w2"))

    assert result == {"receipt": {"message_id": "m-1"}}
    assert sent == []  # settled by the operator: never executed again


def test_an_override_with_evidence_that_is_not_an_object_is_refused(
    store: actae.Store, clock: actae.ManualClock
) -> None:
    run = store.start_run("ovr-bad", agent_id="a", state={})
    store.claim("pay", run_id=run.run_id, worker="dead", lease=30)
    clock.advance(31)
    before = store.events(run.channel_id)

    with pytest.raises(actae.ValidationError) as refused:
        store.override(
            "pay",
            "completed",
            actor="ops",
            reason="r",
            evidence="text",  # type: ignore[arg-type]
            result={"x": 1},
        )

    assert refused.value.field == "evidence"
    assert store.events(run.channel_id) == before
    assert store.effect("pay").status is not actae.EffectStatus.COMPLETED


def _waiting_for_manager(store: actae.Store) -> actae.RunInfo:
    run = store.start_run("appr", agent_id="a", state={})
    with pytest.raises(actae.RunSuspended):
        store.resume(run.run_id, worker="w").wait_for_approval("manager")
    return run


@pytest.mark.parametrize("verb", ["approve", "deny"])
def test_a_decision_for_a_wait_the_run_is_not_in_is_refused(store: actae.Store, verb: str) -> None:
    run = _waiting_for_manager(store)
    before = store.events(run.channel_id)

    with pytest.raises(actae.NotWaitingError) as refused:
        getattr(store, verb)(run.run_id, "manger", actor="alice")

    assert "approval 'manager'" in str(refused.value)
    assert refused.value.waiting == ["approval 'manager'"]
    assert store.events(run.channel_id) == before
    assert "manger" not in store.run(run.run_id).decisions
    getattr(store, verb)(run.run_id, "manager", actor="alice")  # the right name still works
    assert store.run(run.run_id).status is actae.RunStatus.RUNNING


def test_an_approval_for_a_run_that_waits_for_nothing_is_refused(store: actae.Store) -> None:
    run = store.start_run("appr-none", agent_id="a", state={})

    with pytest.raises(actae.NotWaitingError, match="not waiting for anything"):
        store.approve(run.run_id, "manager", actor="alice")


def test_a_signal_may_arrive_before_anyone_waits_for_it(store: actae.Store) -> None:
    """Documented early-signal behaviour: kept until the run waits for that name."""
    run = store.start_run("sig", agent_id="a", state={})
    store.signal(run.run_id, "payment-received", {"amount": 7})

    decision = store.resume(run.run_id, worker="w").wait_for_signal("payment-received")

    assert decision.payload == {"amount": 7}


def test_an_override_result_may_be_any_json_value(
    store: actae.Store, in_doubt: Callable[[actae.RunInfo, str], str]
) -> None:
    run = store.start_run("ovr-str", agent_id="mailer", state={})
    key = in_doubt(run, "send")
    store.override(key, "completed", actor="ops", reason="sent by hand", result="m-7")

    sent = store.resume(run.run_id, worker="w2").effect("send", lambda key, token: None)

    assert sent == "m-7"
