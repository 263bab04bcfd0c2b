"""Retention: policies, legal holds and purges that keep a tombstone and the lineage.

On every backend, on a manual clock: a finished run is purged once its end plus its
policy's time has passed, and not a moment before; a held run never is; a fork keeps the
state it started from when its parent is purged; a purge deletes the run's events, its
data key and the artifacts nobody else references, and leaves a tombstone that
``store.run`` reports.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import actae
from actae.adapters.cli.main import main
from actae.adapters.runtime.backends import SqliteBackend
from actae.adapters.runtime.worker import run_until_idle
from actae.domain import keeping
from tests.custody.sealed import keyring_file, with_option

DAY = 86400.0
BIG = {"doc": "x" * 3000}


def finished(
    store: actae.Store, name: str, *, agent: str = "agent", fail: bool = False
) -> actae.RunInfo:
    """A run that did one step and ended (completed, or failed)."""
    run = store.start_run(name, agent_id=agent, state={"n": 0})
    store.record(run.channel_id, kind="step.result", payload={"n": 1}, expected_cursor=1)
    claim = store.claim(f"{name}-mail", run_id=run.run_id, worker="w", lease=30)
    store.complete_effect(f"{name}-mail", token=claim.token, worker="w", result={"ok": True})
    if fail:
        return store.fail_run(run.run_id, "boom", actor="worker")
    return store.complete_run(run.run_id, {"done": True})


def test_policies_are_validated_audited_and_listed(store: actae.Store) -> None:
    assert store.retention() == {}
    view = store.set_retention({"completed": "7d", "failed": 30 * DAY}, actor="ops")
    assert view == {"default": {"completed": "7d", "failed": "30d"}}
    store.set_retention({"cancelled": timedelta(hours=12)}, agent="billing", actor="ops")
    store.set_retention(None, agent="legal", actor="ops")
    assert store.retention() == {
        "billing": {"cancelled": "12h"},
        "default": {"completed": "7d", "failed": "30d"},
        "legal": None,
    }
    for bad in ({"running": "7d"}, {"completed": "soon"}, {"completed": 0}, "7d"):
        with pytest.raises(actae.ValidationError):
            store.set_retention(bad, actor="ops")  # type: ignore[arg-type]
    with pytest.raises(actae.ValidationError):
        store.set_retention({"completed": "7d"}, actor="")
    store.projector().catch_up()
    audit = store.projector().query(
        "SELECT actor, detail FROM audit WHERE action = 'retention' ORDER BY at"
    )
    assert [row["actor"] for row in audit] == ["ops", "ops", "ops"]


def test_a_finished_run_is_purged_when_its_time_has_come(
    store: actae.Store, clock: actae.ManualClock
) -> None:
    store.set_retention({"completed": "7d", "failed": "30d"}, actor="ops")
    done = finished(store, "done")
    failed = finished(store, "failed", fail=True)
    live = store.start_run("live", agent_id="agent", state={})
    clock.advance(7 * DAY - 1)
    assert store.apply_retention(actor="ops").purged == []
    clock.advance(1)
    dry = store.apply_retention(actor="ops", dry_run=True)
    assert (dry.dry_run, dry.purged) == (True, [done.run_id])
    assert store.run(done.run_id).purged_at is None
    report = store.apply_retention(actor="ops")
    assert report.purged == [done.run_id]
    assert report.events_deleted >= 5
    tombstone = store.run(done.run_id)
    assert tombstone.purged_at == clock()
    assert (tombstone.status, tombstone.workflow_id) == (actae.RunStatus.COMPLETED, "done")
    assert tombstone.ended_at == done.ended_at
    assert tombstone.cursor == done.cursor
    with pytest.raises(actae.NotFoundError):
        store.events(done.channel_id)
    with pytest.raises(actae.NotFoundError):
        store.effect("done-mail")
    assert store.run(failed.run_id).purged_at is None
    assert store.run(live.run_id).purged_at is None
    clock.advance(23 * DAY)
    assert store.apply_retention(actor="ops").purged == [failed.run_id]
    assert store.apply_retention(actor="ops").purged == []
    rows = store.projector().query(
        "SELECT purged_at, lifecycle FROM run_status ORDER BY workflow_id"
    )
    assert [row["lifecycle"] for row in rows] == ["completed", "failed", "running"]
    assert [row["purged_at"] is not None for row in rows] == [True, True, False]
    assert store.projector().query("SELECT * FROM effects") == []
    purges = store.projector().query("SELECT actor, reason FROM audit WHERE action = 'purge'")
    assert {row["reason"] for row in purges} == {
        "default: completed kept 7d",
        "default: failed kept 30d",
    }


def test_an_agents_policy_replaces_the_default(
    store: actae.Store, clock: actae.ManualClock
) -> None:
    store.set_retention({"completed": "1d"}, actor="ops")
    store.set_retention(None, agent="ledger", actor="ops")
    store.set_retention({"completed": "3d"}, agent="slow", actor="ops")
    default = finished(store, "a")
    kept = finished(store, "b", agent="ledger")
    slow = finished(store, "c", agent="slow")
    clock.advance(2 * DAY)
    assert store.apply_retention(actor="ops").purged == [default.run_id]
    clock.advance(365 * DAY)
    assert store.apply_retention(actor="ops").purged == [slow.run_id]
    assert store.run(kept.run_id).purged_at is None


def test_a_held_run_is_never_purged_until_released(
    store: actae.Store, clock: actae.ManualClock
) -> None:
    store.set_retention({"completed": "1d"}, actor="ops")
    run = finished(store, "litigation")
    held = store.hold(run.run_id, actor="legal", reason="case 2026-17")
    assert held.held
    clock.advance(400 * DAY)
    report = store.apply_retention(actor="ops")
    assert (report.purged, report.held) == ([], 1)
    released = store.release(run.run_id, actor="legal", reason="case closed")
    assert not released.held
    assert store.apply_retention(actor="ops").purged == [run.run_id]
    with pytest.raises(actae.NotFoundError, match="purged by retention"):
        store.hold(run.run_id, actor="legal", reason="too late")
    actions = store.projector().query(
        "SELECT action FROM audit WHERE run_id IS NOT NULL ORDER BY at, action"
    )
    assert {"hold", "release", "purge"} <= {row["action"] for row in actions}


def test_a_fork_keeps_its_state_and_its_receipt_when_its_parent_is_purged(
    store_url: str, clock: actae.ManualClock
) -> None:
    with actae.open(with_option(store_url, "inline_max", "1024"), clock=clock) as store:
        store.set_retention({"completed": "1d"}, actor="ops")
        parent = store.start_run("parent", agent_id="agent", state=BIG)
        fork = store.fork(parent.channel_id, at=1, reason="what if")
        store.complete_run(parent.run_id, {})
        clock.advance(2 * DAY)
        assert store.apply_retention(actor="ops").purged == []  # the live fork replays from it
        store.complete_run(fork.child_run_id, {})
        assert store.apply_retention(actor="ops").purged == []  # the fork's own window
        clock.advance(2 * DAY)
        report = store.apply_retention(actor="ops", limit=1)  # the parent, which ended first
        assert report.purged == [parent.run_id]
        assert report.artifacts_deleted == 0  # the fork still references the big state
        child = store.run(fork.child_run_id)
        assert child.forked_from is not None
        assert child.forked_from.parent_run_id == parent.run_id
        assert store.state_at(child.channel_id).state == BIG
        lineage = store.lineage(fork.child_run_id)
        assert [receipt.parent_run_id for receipt in lineage.ancestors] == [parent.run_id]
        assert [r.child_run_id for r in store.lineage(parent.run_id).descendants] == [
            fork.child_run_id
        ]
        assert store.apply_retention(actor="ops").artifacts_deleted == 1


def test_an_encrypted_runs_key_goes_with_it(
    durable_url: str, tmp_path: Path, clock: actae.ManualClock
) -> None:
    url = with_option(durable_url, "keyring", str(keyring_file(tmp_path)))
    with actae.open(url, clock=clock) as store:
        store.set_retention({"completed": "1d"}, actor="ops")
        run = finished(store, "secret")
        assert store._holding.keys.present([run.run_id])
        clock.advance(2 * DAY)
        assert store.apply_retention(actor="ops").purged == [run.run_id]
        assert not store._holding.keys.present([run.run_id])
        assert store.run(run.run_id).purged_at is not None


def test_a_worker_applies_retention_as_it_goes(
    store: actae.Store, clock: actae.ManualClock
) -> None:
    store.set_retention({"completed": "1d"}, actor="ops")
    run = finished(store, "old")
    clock.advance(2 * DAY)
    worker = actae.Worker(store, name="w1", registry=actae.Registry(), retention_every=0.0)
    run_until_idle(worker)
    tombstone = store.run(run.run_id)
    assert tombstone.purged_at is not None
    audit = store.projector().query("SELECT actor FROM audit WHERE action = 'purge'")
    assert [row["actor"] for row in audit] == ["worker w1"]


def test_actae_retention_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    long_ago = actae.ManualClock(datetime(2026, 1, 1, tzinfo=UTC))  # the CLI runs on real time
    with actae.open(url, clock=long_ago) as store:
        store.set_retention({"completed": "30d"}, actor="ops")
        run = finished(store, "old")
        recent = finished(store, "recent")
    with actae.open(url) as store:  # due as well, but on hold
        store.hold(recent.run_id, actor="legal", reason="case 9")
    assert main(["retention", "--db", url, "--dry-run"]) == 0
    assert "would purge 1 of 1 finished runs looked at (1 kept by a legal hold)" in (
        capsys.readouterr().out
    )
    assert main(["retention", "--db", url, "--json", "--as", "cron"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["purged"] == [str(run.run_id)]
    assert report["held"] == 1
    assert report["policies"] == {"default": {"completed": "30d"}}
    status = main(["hold", "--db", url, str(run.run_id)[:8], "--as", "legal", "--reason", "x"])
    assert status == 2
    assert "purged" in capsys.readouterr().err


def test_a_purged_runs_records_go_with_it(store: actae.Store, clock: actae.ManualClock) -> None:
    """A record's operation id is held by its channel event: purged with it, not left behind."""
    store.set_retention({"completed": "1d"}, actor="ops")
    run = store.start_run("recorded", agent_id="agent", state={})
    store.record(run.channel_id, kind="k", payload={}, expected_cursor=1, operation_id="step-1")
    store.complete_run(run.run_id, {"done": True})
    assert store.operation("step-1") is not None
    clock.advance(DAY)

    assert store.apply_retention(actor="ops").purged == [run.run_id]
    assert store.operation("step-1") is None


def lineage(store: actae.Store, kind: str) -> tuple[actae.RunInfo, actae.RunInfo]:
    """A parent that ended and a run inheriting from it: a fork, or a delegated child."""
    parent = store.start_run(f"parent-{kind}", agent_id="agent", state={"n": 0})
    if kind == "fork":
        child_id = store.fork(parent.channel_id, at=1, reason="what if").child_run_id
    else:
        child_id = store.start_run(
            f"child-{kind}", agent_id="agent", state={}, parent_run_id=parent.run_id
        ).run_id
    return store.complete_run(parent.run_id, {}), store.run(child_id)


def decided(store: actae.Store) -> list[actae.RunInfo]:
    """What a dry run would purge, checked against what the pass then purges."""
    dry = store.apply_retention(actor="ops", dry_run=True).purged
    purged = store.apply_retention(actor="ops").purged
    assert sorted(dry) == sorted(purged)
    return [store.run(run_id) for run_id in purged]


@pytest.mark.parametrize("kind", ["fork", "delegated"])
def test_a_hold_on_a_descendant_keeps_the_runs_it_inherits_from(
    store: actae.Store, clock: actae.ManualClock, kind: str
) -> None:
    store.set_retention({"completed": "1d"}, actor="ops")
    parent, child = lineage(store, kind)
    grandchild = store.start_run(
        "grandchild", agent_id="agent", state={}, parent_run_id=child.run_id
    )
    store.complete_run(child.run_id, {})
    store.complete_run(grandchild.run_id, {})
    store.hold(grandchild.run_id, actor="legal", reason="case 2026-17")
    clock.advance(2 * DAY)
    assert decided(store) == []  # the hold reaches the child and, through it, the parent
    store.release(grandchild.run_id, actor="legal", reason="case closed")
    assert {run.run_id for run in decided(store)} == {
        parent.run_id,
        child.run_id,
        grandchild.run_id,
    }


@pytest.mark.parametrize("kind", ["fork", "delegated"])
def test_a_parent_outlives_its_children_and_their_windows(
    store: actae.Store, clock: actae.ManualClock, kind: str
) -> None:
    store.set_retention({"completed": "1d"}, actor="ops")
    parent, child = lineage(store, kind)
    clock.advance(2 * DAY)
    assert decided(store) == []  # the child is still running
    store.complete_run(child.run_id, {})
    clock.advance(DAY - 1)
    assert decided(store) == []  # the child ended, but is within its own window
    clock.advance(1)
    purged = decided(store)
    assert {run.run_id for run in purged} == {parent.run_id, child.run_id}
    assert all(run.purged_at is not None for run in purged)


def test_a_child_kept_forever_keeps_its_parent(
    store: actae.Store, clock: actae.ManualClock
) -> None:
    store.set_retention({"completed": "1d"}, actor="ops")
    store.set_retention(None, agent="archive", actor="ops")
    parent = store.start_run("parent", agent_id="agent", state={})
    child = store.start_run("child", agent_id="archive", state={}, parent_run_id=parent.run_id)
    store.complete_run(child.run_id, {})
    store.complete_run(parent.run_id, {})
    clock.advance(400 * DAY)
    assert decided(store) == []


def test_actae_retention_dry_run_sees_the_lineage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    long_ago = actae.ManualClock(datetime(2026, 1, 1, tzinfo=UTC))  # the CLI runs on real time
    with actae.open(url, clock=long_ago) as store:
        store.set_retention({"completed": "30d"}, actor="ops")
        parent, child = lineage(store, "delegated")
        lonely = finished(store, "lonely")
        store.complete_run(child.run_id, {})
        store.hold(child.run_id, actor="legal", reason="case 9")
    assert main(["retention", "--db", url, "--dry-run", "--json"]) == 0
    dry = json.loads(capsys.readouterr().out)
    assert dry["purged"] == [str(lonely.run_id)]  # not the parent of the held child
    assert main(["retention", "--db", url, "--json", "--as", "cron"]) == 0
    assert json.loads(capsys.readouterr().out)["purged"] == dry["purged"]
    with actae.open(url) as store:
        assert store.run(parent.run_id).purged_at is None


def test_the_purge_itself_decides_on_the_stored_lineage(
    store: actae.Store, clock: actae.ManualClock
) -> None:
    """A hold placed after a pass listed the parent still wins: the tombstone checks again."""
    store.set_retention({"completed": "1d"}, actor="ops")
    parent, child = lineage(store, "fork")
    store.complete_run(child.run_id, {})
    clock.advance(2 * DAY)
    store.hold(child.run_id, actor="legal", reason="case 12")
    assert keeping.purge(store._service, parent.run_id, actor="ops") is None
    assert store.run(parent.run_id).purged_at is None


def test_an_effect_key_used_again_after_its_run_was_purged_is_a_new_history(
    store: actae.Store, clock: actae.ManualClock
) -> None:
    """The purging process knows the key's old history is gone on purpose: no regression."""
    store.set_retention({"completed": "7d"}, actor="ops")
    first = store.start_run("invoice-42", agent_id="agent", state={})
    claim = store.claim("invoice-42:charge", run_id=first.run_id, worker="w", lease=30)
    for _ in range(3):  # a longer history than the new one will have
        store.heartbeat("invoice-42:charge", token=claim.token, worker="w", lease=30)
    store.complete_effect("invoice-42:charge", token=claim.token, worker="w", result={"n": 1})
    assert store.effect("invoice-42:charge").result == {"n": 1}
    store.complete_run(first.run_id, {})
    clock.advance(7 * DAY)
    assert store.apply_retention(actor="ops").purged == [first.run_id]

    again = store.start_run("invoice-42 again", agent_id="agent", state={})
    claim = store.claim("invoice-42:charge", run_id=again.run_id, worker="w", lease=30)
    store.complete_effect("invoice-42:charge", token=claim.token, worker="w", result={"n": 2})

    assert store.effect("invoice-42:charge").result == {"n": 2}  # read whole: no regression


def test_a_claim_on_a_run_whose_purge_was_cut_short_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A purge writes the tombstone first; a store that never saw the run reads it too."""
    url, clock = f"sqlite:///{tmp_path / 'shared.db'}", actae.ManualClock()
    with actae.open(url, clock=clock) as first:
        run = first.start_run("w", agent_id="x", state={"n": 0})
        first.transition(
            run.channel_id,
            kind="k",
            payload={},
            state={"n": 1},
            expected_version=1,
            expected_cursor=1,
        )
        first.complete_run(run.run_id, {"done": True})
        first.set_retention({"completed": "1h"}, actor="ops")
        clock.advance(2 * 3600)
        with monkeypatch.context() as cut_short:  # the deletes after the tombstone never ran
            cut_short.setattr(SqliteBackend, "delete_events", lambda _self, **_: 0)
            assert first.apply_retention(actor="ops").purged == [run.run_id]
    with actae.open(url, clock=clock) as second, pytest.raises(actae.NotFoundError):
        second.claim("charge", run_id=run.run_id, worker="w", lease=30.0)
