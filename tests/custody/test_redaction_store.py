"""Redaction before storage, through the store and a workflow's worker.

With ``actae.open(url, redact=True)`` (or a workflow's ``redact=``) API keys, bearer
tokens, card numbers and e-mail addresses never reach the database; the event records
which patterns matched and how often, never the secret.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import actae
from actae.adapters.runtime.worker import run_until_idle
from actae.redaction import Redacted, chain, redact_secrets, redactor_from
from tests.custody.sealed import raw_event_bodies

KEY = "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0" * 2
CARD = "4111 1111 1111 1111"
EMAIL = "jane.doe@example.com"
TOOL_OUTPUT = {
    "headers": {"Authorization": f"Bearer {KEY}"},
    "note": f"paid with {CARD} by {EMAIL}",
}


def test_a_store_that_redacts_never_writes_the_secrets(durable_url: str) -> None:
    with actae.open(durable_url, redact=True) as store:
        run = store.start_run("wf", agent_id="a", state={})
        store.record(run.channel_id, kind="tool.output", payload=TOOL_OUTPUT, expected_cursor=1)
        event = store.events(run.channel_id)[1]
        claim = store.claim("charge", run_id=run.run_id, worker="w", lease=30)
        effect = store.complete_effect(
            "charge", token=claim.token, worker="w", result={"receipt_email": EMAIL}
        )
    assert event.payload == {
        "headers": {"Authorization": "[redacted:secret_field]"},
        "note": "paid with [redacted:card_number] by [redacted:email]",
    }
    assert event.redacted == {"secret_field": 1, "card_number": 1, "email": 1}
    assert effect.result == {"receipt_email": "[redacted:email]"}
    if durable_url.startswith("sqlite"):
        stored = b"".join(raw_event_bodies(durable_url))
        for secret in (KEY, CARD, EMAIL):
            assert secret.encode() not in stored


def test_a_workflow_redacts_its_steps_records_and_effects(store: actae.Store) -> None:
    workflows = actae.Registry()

    @workflows.workflow("leaky", redact=True)
    def leaky(ctx: actae.RunContext) -> dict[str, Any]:
        ctx.step("call the tool", lambda: TOOL_OUTPUT)
        ctx.record("tool.log", {"line": f"used key {KEY}"})
        ctx.effect("mail", lambda key, token: {"sent_to": EMAIL})
        return {"done": True}

    run = store.start_run("wf", agent_id="leaky", state={})
    run_until_idle(actae.Worker(store, name="w1", registry=workflows))
    assert store.run(run.run_id).status is actae.RunStatus.COMPLETED
    events = store.events(run.channel_id)
    text = repr([e.payload for e in events])
    for secret in (KEY, CARD, EMAIL):
        assert secret not in text
    counts: dict[str, int] = {}
    for event in events:
        for name, count in event.redacted.items():
            counts[name] = counts.get(name, 0) + count
    assert counts == {"secret_field": 1, "card_number": 1, "email": 1, "api_key": 1}
    mail = store.effect(f"{run.run_id}:effect:mail:1")  # its counts are on the ledger's event
    assert mail.result == {"value": {"sent_to": "[redacted:email]"}}


def test_your_own_redactor_and_the_builtin_ones_chain(store: actae.Store) -> None:
    tickets = redactor_from({"ticket": r"TICKET-\d+"})
    run = store.start_run("wf", agent_id="a", state={})
    both = chain(redact_secrets, tickets)
    store.record(
        run.channel_id,
        kind="note",
        payload={"text": f"TICKET-991 for {EMAIL}"},
        expected_cursor=1,
        redact=both,
    )
    event = store.events(run.channel_id)[1]
    assert event.payload == {"text": "[redacted:ticket] for [redacted:email]"}
    assert event.redacted == {"ticket": 1, "email": 1}


def test_a_redactor_that_breaks_its_contract_writes_nothing(store: actae.Store) -> None:
    run = store.start_run("wf", agent_id="a", state={})

    def returns_a_plain_dict(document: Any) -> Any:
        return {"oops": document}

    def returns_no_json(document: Any) -> Redacted:
        return Redacted({"when": object()}, {})

    for bad in (returns_a_plain_dict, returns_no_json, "not a redactor"):
        with pytest.raises(actae.ValidationError):
            store.record(run.channel_id, kind="x", payload={"a": 1}, expected_cursor=1, redact=bad)  # type: ignore[arg-type]
    assert [e.kind for e in store.events(run.channel_id)] == ["run.started"]
    with pytest.raises(actae.ValidationError, match="redact"):
        actae.open("memory://", redact="yes please")  # type: ignore[arg-type]


def test_nothing_changes_without_a_redactor(tmp_path: Path) -> None:
    with actae.open(f"sqlite:///{tmp_path / 'store.db'}") as store:
        run = store.start_run("wf", agent_id="a", state={})
        store.record(run.channel_id, kind="tool.output", payload=TOOL_OUTPUT, expected_cursor=1)
        event = store.events(run.channel_id)[1]
    assert event.payload == TOOL_OUTPUT
    assert event.redacted == {}
