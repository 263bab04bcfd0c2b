"""An approver's note is contents: sealed with the decision on an encrypted store.

The note is free text written by a person, so it is kept like the decision's payload:
sealed under the run's data key, readable by the store that holds the keyring, gone with
``forget``. The audit read model keeps only that a note was given (``detail.noted``);
its ``reason`` stays empty. On a store in clear the note stays readable in the audit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import actae
from tests.custody.sealed import (
    MARKER,
    contains_marker,
    every_table_text,
    keyring_file,
    raw_event_bodies,
    schema_of,
    with_option,
)

APPROVAL_NOTE = f"refund approved, customer said {MARKER}"
DENIAL_NOTE = f"upgrade denied: {MARKER} is not a plan"


def decided_run(store: actae.Store) -> actae.RunInfo:
    """A run with an approval and a denial, each with a note, and one without."""
    run = store.start_run("notes", agent_id="agent", state={})
    answers = (
        (store.approve, "refund", APPROVAL_NOTE),
        (store.deny, "upgrade", DENIAL_NOTE),
        (store.approve, "quiet", None),
    )
    for answer, name, note in answers:
        store.suspend(run.run_id, reason="approval", name=name)
        answer(run.run_id, name, actor="alice", note=note)
    store.projector().catch_up()
    return run


def audit_of(store: actae.Store, run: actae.RunInfo) -> dict[str, dict[str, Any]]:
    """The run's decisions in the audit read model, by approval name (through SQL)."""
    rows = store.projector().query("SELECT run_id, action, reason, detail FROM audit")
    found: dict[str, dict[str, Any]] = {}
    for row in rows:
        detail = row["detail"] if isinstance(row["detail"], dict) else json.loads(row["detail"])
        if str(row["run_id"]) == str(run.run_id) and row["action"] in ("approve", "deny"):
            found[detail["name"]] = {**row, "detail": detail}
    return found


def test_a_note_is_sealed_and_only_its_presence_is_audited(
    durable_url: str, tmp_path: Path
) -> None:
    url = with_option(durable_url, "keyring", str(keyring_file(tmp_path)))
    with actae.open(url) as store:
        run = decided_run(store)
        schema = None if url.startswith("sqlite") else schema_of(url)
        bodies = raw_event_bodies(url, schema)
        assert not [body for body in bodies if MARKER.encode() in body]
        audit = audit_of(store, run)
        assert contains_marker(repr(audit)) is False
        assert {name: row["reason"] for name, row in audit.items()} == {
            "refund": None,
            "upgrade": None,
            "quiet": None,
        }
        assert {name: row["detail"]["noted"] for name, row in audit.items()} == {
            "refund": True,
            "upgrade": True,
            "quiet": False,
        }
        decisions = store.run(run.run_id).decisions
        assert decisions["refund"].note == APPROVAL_NOTE  # the owner reads it back
        assert decisions["upgrade"].note == DENIAL_NOTE
        assert decisions["quiet"].note is None

        store.forget(run.run_id, actor="dpo", reason="erasure request")
        after = store.run(run.run_id).decisions
        assert (after["refund"].note, after["upgrade"].note) == (None, None)
        assert after["refund"].noted  # that a note was given is metadata, and stays
        events = store.events(run.channel_id)
        noted = [e for e in events if e.kind in ("run.approved", "run.denied")]
        assert [e.payload for e in noted] == [None, None, None]
        with pytest.raises(actae.ForgottenError):
            noted[0].contents()
    with actae.open(url) as reopened:  # the same keyring cannot bring it back
        assert reopened.run(run.run_id).decisions["refund"].note is None


@pytest.mark.postgres
def test_no_table_holds_a_note_in_clear(pg_url: str, tmp_path: Path) -> None:
    """Every row of every table of the schema, the analyst's read models included."""
    url = with_option(pg_url, "keyring", str(keyring_file(tmp_path)))
    with actae.open(url) as store:
        decided_run(store)
    tables = every_table_text(url)
    assert [name for name, text in tables.items() if contains_marker(text)] == []


def test_on_a_store_in_clear_the_note_stays_readable(store: actae.Store) -> None:
    run = decided_run(store)
    audit = audit_of(store, run)
    assert {name: row["reason"] for name, row in audit.items()} == {
        "refund": APPROVAL_NOTE,
        "upgrade": DENIAL_NOTE,
        "quiet": None,
    }
    assert [audit[name]["detail"]["noted"] for name in ("refund", "upgrade", "quiet")] == [
        True,
        True,
        False,
    ]
    assert store.run(run.run_id).decisions["upgrade"].note == DENIAL_NOTE
