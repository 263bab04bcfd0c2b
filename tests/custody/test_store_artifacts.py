"""Large documents as artifacts, through the store: offloaded, deduplicated, authenticated.

A document larger than the URL's ``inline_max`` leaves its event row for the artifact
store and reads back transparently; identical documents are stored once; ``put_artifact``
and ``open_artifact`` stream a caller's own bytes; a tampered reference is refused.
"""

from __future__ import annotations

import io
import sqlite3
from pathlib import Path

import pytest

import actae
from tests.custody.sealed import MARKER, keyring_file, raw_event_bodies, with_option

BACKENDS = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
BIG = {"doc": MARKER * 200, "rows": list(range(500))}  # about 6 KB of JSON


@pytest.fixture(params=BACKENDS)
def small_inline(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store URL whose documents above 1 KiB become artifacts."""
    if request.param == "memory":
        url = "memory://"
    elif request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'store.db'}"
    else:
        url = request.getfixturevalue("pg_url")
    return with_option(url, "inline_max", "1024")


@pytest.mark.parametrize("sealed", [False, True], ids=["clear", "sealed"])
def test_a_large_state_is_offloaded_and_reads_back(
    small_inline: str, sealed: bool, tmp_path: Path
) -> None:
    keyring = str(keyring_file(tmp_path)) if sealed else None
    with actae.open(small_inline, keyring=keyring) as store:
        run = store.start_run("wf", agent_id="a", state=BIG)
        store.transition(
            run.channel_id,
            kind="same state again",
            payload={"small": True},
            state=BIG,
            expected_version=1,
            expected_cursor=1,
        )
        assert store.state_at(run.channel_id, 1).state == BIG
        assert store.state_at(run.channel_id).state == BIG
        assert store.events(run.channel_id)[1].payload == {"small": True}
        assert len(store._holding.artifacts.refs.names_of(run.run_id)) == 1  # stored once
    if small_inline.startswith("sqlite"):
        bodies = raw_event_bodies(small_inline.split("?", maxsplit=1)[0])
        assert max(len(body) for body in bodies) < 1024 + 1024
        assert not any(MARKER.encode() in body for body in bodies)


def test_identical_documents_of_two_runs_are_stored_once(small_inline: str) -> None:
    with actae.open(small_inline) as store:
        first = store.start_run("wf-1", agent_id="a", state=BIG)
        second = store.start_run("wf-2", agent_id="a", state=BIG)
        fork = store.fork(first.channel_id, at=1)
        holding = store._holding
        names = {
            name
            for run_id in (first.run_id, second.run_id, fork.child_run_id)
            for name in holding.artifacts.refs.names_of(run_id)
        }
        assert len(names) == 1
        assert store.state_at(fork.child_channel_id).state == BIG


def test_put_and_open_an_artifact(small_inline: str, tmp_path: Path) -> None:
    with actae.open(small_inline) as store:
        run = store.start_run("wf", agent_id="a", state={})
        ref = store.put_artifact(
            run.run_id, b"%PDF-1.7 " + MARKER.encode(), media_type="application/pdf"
        )
        assert ref.size == 9 + len(MARKER)
        assert ref.media_type == "application/pdf"
        assert store.open_artifact(ref).read() == b"%PDF-1.7 " + MARKER.encode()
        kept = ref.model_dump(mode="json")  # as a step result would keep it
        assert store.open_artifact(kept).read(4) == b"%PDF"
        path = tmp_path / "report.bin"
        path.write_bytes(bytes(range(256)) * 9000)
        from_file = store.put_artifact(run.run_id, path)
        again = store.put_artifact(run.run_id, io.BytesIO(path.read_bytes()))
        assert from_file == again
        with store.open_artifact(from_file) as stream:
            assert stream.read() == path.read_bytes()


def test_a_tampered_or_malformed_reference_is_refused(small_inline: str) -> None:
    with actae.open(small_inline) as store:
        run = store.start_run("wf", agent_id="a", state={})
        other = store.start_run("wf-2", agent_id="a", state={})
        ref = store.put_artifact(run.run_id, b"the invoice")
        for change in ({"size": 10}, {"run_id": other.run_id}, {"media_type": "text/html"}):
            with pytest.raises(actae.CorruptionError):
                store.open_artifact(ref.model_copy(update=change)).read()
        with pytest.raises(actae.ValidationError):
            store.open_artifact({"digest": "nope"})
        with pytest.raises(actae.NotFoundError):
            store.put_artifact("00000000-0000-4000-8000-000000000000", b"x")


def test_a_tampered_blob_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with actae.open(url) as store:
        run = store.start_run("wf", agent_id="a", state={})
        ref = store.put_artifact(run.run_id, b"pay 100 EUR to alice")
    with sqlite3.connect(tmp_path / "store.db") as db:
        db.execute("UPDATE actae_artifact_chunks SET data = ?", (b"pay 900 EUR to mallo",))
    with actae.open(url) as store, pytest.raises(actae.CorruptionError):
        store.open_artifact(ref).read()


def test_a_forgotten_runs_artifacts_cannot_be_opened(small_inline: str, tmp_path: Path) -> None:
    with actae.open(small_inline, keyring=str(keyring_file(tmp_path))) as store:
        run = store.start_run("wf", agent_id="a", state=BIG)
        ref = store.put_artifact(run.run_id, MARKER.encode())
        assert ref.sealed
        assert store.open_artifact(ref).read() == MARKER.encode()
        store.forget(run.run_id, actor="dpo", reason="erasure")
        with pytest.raises(actae.ForgottenError):
            store.open_artifact(ref)
        with pytest.raises(actae.ForgottenError):
            store.put_artifact(run.run_id, b"more")
