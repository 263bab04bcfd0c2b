"""Crypto-shredding: ``store.forget`` destroys a run's data key, audited, for good.

Afterwards the run's structure stays readable (status, cursors, kinds, versions, times,
lineage, audit), its contents do not, on any backend, after re-opening with the same
keyring too, and on PostgreSQL no table holds a trace of them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import actae
from tests.custody.sealed import (
    MARKER,
    contains_marker,
    every_table_text,
    keyring_file,
    with_option,
    write_marker_run,
)


@pytest.fixture
def sealed_url(store_url: str, tmp_path: Path) -> str:
    """An empty store's URL with a keyring."""
    return with_option(store_url, "keyring", str(keyring_file(tmp_path)))


def _forget(store: actae.Store, run_id: object) -> actae.RunInfo:
    return store.forget(run_id, actor="dpo@example.com", reason="erasure request #42")  # type: ignore[arg-type]


def test_a_forgotten_run_keeps_its_structure_and_loses_its_contents(sealed_url: str) -> None:
    with actae.open(sealed_url) as store:
        written = write_marker_run(store)
        run = written.run
        before = store.events(run.channel_id)
        forgotten = _forget(store, run.run_id)
        assert forgotten.status is actae.RunStatus.FORGOTTEN
        assert forgotten.forgotten_at is not None
        assert forgotten.result is None
        after = store.events(run.channel_id)
        assert [(e.cursor, e.kind, e.state_version, e.recorded_at) for e in after] == [
            (e.cursor, e.kind, e.state_version, e.recorded_at) for e in before
        ]
        assert all(e.payload is None and e.forgotten for e in after)
        with pytest.raises(actae.ForgottenError):
            after[1].contents()
        for read in (
            lambda: store.state_at(run.channel_id),
            lambda: store.state_at(run.channel_id, 1),
            lambda: store.recover(run.channel_id),
            lambda: store.effect(written.effect_key),
        ):
            with pytest.raises(actae.ForgottenError, match=str(run.run_id)):
                read()
        assert store.head(run.channel_id).cursor == run.cursor
        assert store.run(run.run_id).usage == run.usage  # usage and cost stay in clear
        with pytest.raises(actae.ForgottenError):  # nothing new is added to it
            store.record(run.channel_id, kind="x", payload={}, expected_cursor=run.cursor)
        assert _forget(store, run.run_id).forgotten_at == forgotten.forgotten_at  # again: same


def test_the_read_models_show_it_forgotten_with_its_audit(sealed_url: str) -> None:
    with actae.open(sealed_url) as store:
        run = write_marker_run(store).run
        _forget(store, run.run_id)
        store.projector().catch_up()
        db = store.projector().db
        status = db.query(
            f"SELECT status, lifecycle, next_action FROM run_status WHERE run_id = '{run.run_id}'"
        )
        audit = db.query("SELECT action, actor, reason FROM audit WHERE action = 'forget'")
    assert [tuple(row.values()) for row in status] == [("forgotten", "completed", "none")]
    assert [tuple(row.values()) for row in audit] == [
        ("forget", "dpo@example.com", "erasure request #42")
    ]


def test_reopening_with_the_same_keyring_cannot_read_it(durable_url: str, tmp_path: Path) -> None:
    url = with_option(durable_url, "keyring", str(keyring_file(tmp_path)))
    with actae.open(url) as store:
        run = write_marker_run(store).run
        _forget(store, run.run_id)
    with actae.open(url) as store:
        assert store.run(run.run_id).status is actae.RunStatus.FORGOTTEN
        with pytest.raises(actae.ForgottenError):
            store.state_at(run.channel_id)
        assert all(e.forgotten for e in store.events(run.channel_id))


def test_a_live_run_is_cancelled_and_its_forks_keep_their_own_contents(sealed_url: str) -> None:
    with actae.open(sealed_url) as store:
        written = write_marker_run(store, complete=False)
        run = written.run
        fork = store.fork(run.channel_id, at=3, reason="try again")
        forgotten = _forget(store, run.run_id)
        assert forgotten.status is actae.RunStatus.FORGOTTEN
        child = store.run(fork.child_run_id)
        assert child.forked_from is not None
        assert child.forked_from.parent_run_id == run.run_id
        assert store.state_at(child.channel_id).state == {"secret": MARKER, "n": 1}
        assert store.lineage(fork.child_run_id).ancestors  # the receipt still names the parent
        with pytest.raises(actae.ForgottenError):
            store.fork(run.channel_id, at=3)


def test_a_run_written_without_encryption_cannot_be_shredded(store_url: str) -> None:
    with actae.open(store_url) as store:
        run = store.start_run("wf", agent_id="a", state={"n": 1})
        with pytest.raises(actae.ValidationError, match="without encryption"):
            _forget(store, run.run_id)
        assert store.run(run.run_id).status is actae.RunStatus.RUNNING
        assert [e.kind for e in store.events(run.channel_id)] == ["run.started"]
        with pytest.raises(actae.NotFoundError):
            _forget(store, "00000000-0000-4000-8000-000000000000")
        with pytest.raises(actae.ValidationError):
            store.forget(run.run_id, actor="", reason="r")


@pytest.mark.postgres
def test_after_forget_no_table_holds_a_trace_of_the_contents(pg_url: str, tmp_path: Path) -> None:
    url = with_option(pg_url, "keyring", str(keyring_file(tmp_path)))
    with actae.open(url) as store:
        run = write_marker_run(store).run
        _forget(store, run.run_id)
        store.projector().catch_up()
    tables = every_table_text(url)
    assert [name for name, text in tables.items() if contains_marker(text)] == []
    assert "forgotten" in tables["run_status"]
    with actae.open(url) as store, pytest.raises(actae.ForgottenError):
        store.state_at(run.channel_id)


def test_a_store_that_never_saw_a_forgotten_run_cannot_claim_an_effect_of_it(
    tmp_path: Path,
) -> None:
    """Its claim guesses the run's head and reads nothing: the write itself is refused."""
    url = with_option(f"sqlite:///{tmp_path / 'shared.db'}", "keyring", str(keyring_file(tmp_path)))
    with actae.open(url) as first:
        run = first.start_run("w", agent_id="x", state={"n": 0})
        _forget(first, run.run_id)
    with actae.open(url) as second, pytest.raises(actae.ForgottenError):
        second.claim("charge", run_id=run.run_id, worker="w", lease=30.0)
