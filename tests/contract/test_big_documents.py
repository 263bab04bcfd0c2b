"""Contract: big states and payloads round-trip with their checksum verified on read."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import orjson
import pytest

import actae
from tests.contract.rows import rewritten

TWENTY_MB = 20 * 1024 * 1024


def test_twenty_megabyte_state_round_trips(durable_url: str) -> None:
    blob = hashlib.sha256(b"seed").hexdigest() * (TWENTY_MB // 64)
    state = {"notes": blob, "items": list(range(1000))}
    with actae.open(durable_url) as store:
        run = store.start_run("big", agent_id="a", state={"step": 0})
        store.transition(
            run.channel_id,
            kind="big",
            payload={"blob": blob[:1_000_000]},
            state=state,
            expected_version=1,
            expected_cursor=1,
        )

    with actae.open(durable_url) as reopened:
        loaded = reopened.state_at(run.channel_id)
        assert loaded.state == state
        canonical = orjson.dumps(state, option=orjson.OPT_SORT_KEYS)
        assert loaded.checksum == "sha256:" + hashlib.sha256(canonical).hexdigest()
        assert reopened.events(run.channel_id, after=1)[0].contents()["blob"] == blob[:1_000_000]


def test_tampered_state_is_refused_on_read(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    with actae.open(f"sqlite:///{path}") as store:
        run = store.start_run("wf", agent_id="a", state={"balance": 100})
    with sqlite3.connect(path) as db:
        (blob, topic) = db.execute(
            "SELECT state, topic FROM stored_events WHERE originator_id = ?",
            (run.channel_id.hex,),
        ).fetchone()
        # The body's own checksum made to match: the state's checksum must still refuse it.
        tampered = rewritten(
            topic, run.channel_id, 1, blob, lambda b: b.replace(b'"balance":100', b'"balance":999')
        )
        db.execute(
            "UPDATE stored_events SET state = ? WHERE originator_id = ?",
            (tampered, run.channel_id.hex),
        )

    with actae.open(f"sqlite:///{path}") as store, pytest.raises(actae.CorruptionError) as caught:
        store.state_at(run.channel_id)
    assert "does not match the recorded sha256:" in str(caught.value)  # the state's checksum
