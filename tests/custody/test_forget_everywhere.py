"""A forget is seen by every process from the moment it commits (issue 28, item 8).

Each process caches runs' data keys. Two stores opened on one URL hold two processes'
worth of caches: the second reads the run (warming its caches), the first forgets it, and
at once, with no clock moved and nothing waited for, every read of the run's contents in
the second raises ``ForgottenError`` and every write is refused with nothing written. On
PostgreSQL a real second process does the same. ``memory://`` stores share nothing (each
is its own store), so this runs on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import actae
from tests.custody.forgetting import attempts
from tests.custody.sealed import MARKER, keyring_file, with_option, write_marker_run

WITNESS = Path(__file__).with_name("forget_witness.py")
ROOT = Path(__file__).resolve().parents[2]


def sealed_run(store: actae.Store) -> tuple[actae.RunInfo, str, actae.ArtifactRef]:
    """A live run with contents everywhere, an effect and an artifact."""
    written = write_marker_run(store, complete=False)
    ref = store.put_artifact(written.run.run_id, f"bytes of {MARKER}".encode())
    return store.run(written.run.run_id), written.effect_key, ref


def test_a_second_store_refuses_the_run_at_once(
    durable_url: str, tmp_path: Path, clock: actae.ManualClock
) -> None:
    url = with_option(durable_url, "keyring", str(keyring_file(tmp_path)))
    with actae.open(url, clock=clock) as first, actae.open(url, clock=clock) as second:
        run, effect_key, ref = sealed_run(first)
        seen = second.run(run.run_id)
        for name, attempt in attempts(second, seen, effect_key, ref).items():
            if name not in ("record", "transition"):
                attempt()  # every read works, and the second store now caches the key
        second.record(run.channel_id, kind="warm", payload={}, expected_cursor=seen.cursor)
        first.forget(run.run_id, actor="dpo", reason="erasure request")
        head = first.head(run.channel_id)
        count = len(first.events(run.channel_id))
        for name, attempt in attempts(second, second.run(run.run_id), effect_key, ref).items():
            with pytest.raises(actae.ForgottenError):
                attempt()
            assert (name, first.head(run.channel_id)) == (name, head)  # nothing written
        assert len(first.events(run.channel_id)) == count
        assert all(event.forgotten for event in second.events(run.channel_id))


@pytest.mark.postgres
def test_a_second_process_refuses_the_run_at_once(pg_url: str, tmp_path: Path) -> None:
    url = with_option(pg_url, "keyring", str(keyring_file(tmp_path)))
    with actae.open(url) as store:
        run, effect_key, ref = sealed_run(store)
        witness = subprocess.Popen(
            [sys.executable, str(WITNESS), url, str(run.run_id), effect_key, ref.model_dump_json()],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        try:
            assert witness.stdout is not None
            assert witness.stdin is not None
            assert witness.stdout.readline().strip() == "warm"
            store.forget(run.run_id, actor="dpo", reason="erasure request")
            head = store.head(run.channel_id)
            witness.stdin.write("forgotten\n")
            witness.stdin.flush()
            outcome = json.loads(witness.stdout.readline())
            assert witness.wait(timeout=60) == 0
        finally:
            witness.kill()
        assert outcome == dict.fromkeys(
            ("state", "events", "recover", "effect", "artifact", "record", "transition"),
            "ForgottenError",
        )
        assert store.head(run.channel_id) == head  # nothing written by the witness


@pytest.mark.parametrize("write", ["record", "transition"])
def test_a_write_is_refused_by_the_store_whatever_the_cache_says(
    durable_url: str, tmp_path: Path, write: str
) -> None:
    """A write that reads nothing first (the hot path) is refused by its own statement."""
    url = with_option(durable_url, "keyring", str(keyring_file(tmp_path)))
    with actae.open(url) as first, actae.open(url) as second:
        run = write_marker_run(first).run
        head = second.record(run.channel_id, kind="warm", payload={}, expected_cursor=run.cursor)
        first.forget(run.run_id, actor="dpo", reason="erasure request")
        writes = {
            "record": lambda: second.record(
                run.channel_id, kind="late", payload={"x": 1}, expected_cursor=head.cursor
            ),
            "transition": lambda: second.transition(
                run.channel_id,
                kind="late",
                payload={},
                state={"n": 9},
                expected_version=head.state_version,
                expected_cursor=head.cursor,
            ),
        }
        with pytest.raises(actae.ForgottenError):
            writes[write]()
        assert first.head(run.channel_id) == head  # nothing written


@pytest.mark.parametrize("read", ["state", "events", "recover", "effect", "artifact"])
def test_each_read_is_refused_as_the_first_thing_after_the_forget(
    durable_url: str, tmp_path: Path, read: str
) -> None:
    """No read relies on another having brought the news first."""
    url = with_option(durable_url, "keyring", str(keyring_file(tmp_path)))
    with actae.open(url) as first, actae.open(url) as second:
        run, effect_key, ref = sealed_run(first)
        for name, attempt in attempts(second, run, effect_key, ref).items():
            if name not in ("record", "transition"):
                attempt()
        first.forget(run.run_id, actor="dpo", reason="erasure request")
        with pytest.raises(actae.ForgottenError):
            attempts(second, run, effect_key, ref)[read]()
