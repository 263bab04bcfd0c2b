"""The edges of custody a review found: mixed runs, live runs, rotation, purges cut short.

Each test pins one promise of docs/data.md where it is easiest to break: a run is
encrypted from its birth or never; forgetting a live run stops its workflow; a running
process follows a rotation of the keyring; a purge interrupted after its tombstone is
finished by the next pass; a child's purge leaves its parent's record of starting it;
retention is not starved by runs it must keep; a step's error stays out of clear text.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import actae
from actae.adapters.custody.datakeys import StoredKey
from actae.adapters.custody.keyring import load_keyring, save_keyring
from actae.domain import keeping
from tests.custody.sealed import (
    MARKER,
    contains_marker,
    every_table_text,
    keyring_file,
    raw_event_bodies,
    with_option,
)

DAY = 86400.0


def test_a_run_born_in_clear_stays_in_clear_and_cannot_be_shredded(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with actae.open(url) as store:
        run = store.start_run("wf", agent_id="a", state={"n": 0})
    with actae.open(url, keyring=str(keyring_file(tmp_path))) as store:
        store.record(run.channel_id, kind="note", payload={"x": MARKER}, expected_cursor=1)
        assert store.events(run.channel_id)[1].payload == {"x": MARKER}
        with pytest.raises(actae.ValidationError, match="without encryption"):
            store.forget(run.run_id, actor="dpo", reason="erasure")
        born_sealed = store.start_run("wf-2", agent_id="a", state={"n": 0})
        store.forget(born_sealed.run_id, actor="dpo", reason="erasure")
    bodies = raw_event_bodies(url)
    assert sum(MARKER.encode() in body for body in bodies) == 1  # the clear run's note


def test_forgetting_a_live_run_stops_its_workflow(store_url: str, tmp_path: Path) -> None:
    url = with_option(store_url, "keyring", str(keyring_file(tmp_path)))
    with actae.open(url) as store:
        run = store.start_run("wf", agent_id="a", state={})
        ctx = store.resume(run.run_id, worker="w")
        ctx.step("first", lambda: 1)
        store.forget(run.run_id, actor="dpo", reason="erasure")
        ran: list[str] = []
        with pytest.raises(actae.RunStoppedError):
            ctx.step("second", lambda: ran.append("second"))
        assert ran == []


def test_a_running_process_follows_a_rotation(durable_url: str, tmp_path: Path) -> None:
    keys = keyring_file(tmp_path)
    with (
        actae.open(durable_url, keyring=str(keys)) as old,
        actae.open(durable_url, keyring=str(keys)) as rotating,
    ):
        run = old.start_run("wf", agent_id="a", state={"s": MARKER})
        save_keyring(load_keyring(keys).with_new_key(), keys, replace=True)
        with actae.open(durable_url, keyring=str(keys)) as fresh:
            assert fresh.rotate_keys() == 1
        old._holding.keys._cache.clear()  # as if its 30 s cache had run out
        assert old.state_at(run.channel_id).state == {"s": MARKER}
        assert rotating.start_run("wf-2", agent_id="a", state={}).cursor == 1


def test_a_purge_cut_short_after_its_tombstone_is_finished(
    store: actae.Store, clock: actae.ManualClock
) -> None:
    store.set_retention({"completed": "1d"}, actor="ops")
    run = store.start_run("wf", agent_id="a", state={"s": MARKER})
    store.complete_run(run.run_id, {})
    clock.advance(2 * DAY)
    keeping.purge(store._service, run.run_id, actor="crashed")
    store.projector().catch_up()
    assert store.run(run.run_id).purged_at is not None
    assert store.events(run.channel_id)  # the crash came before the deletes
    store.apply_retention(actor="ops")
    with pytest.raises(actae.NotFoundError):
        store.events(run.channel_id)


def test_a_forget_and_a_purge_cut_short_before_their_keys_go_are_finished(
    store_url: str, tmp_path: Path
) -> None:
    clock = actae.ManualClock()
    url = with_option(store_url, "keyring", str(keyring_file(tmp_path)))
    with actae.open(url, clock=clock) as store:
        store.set_retention({"completed": "1d"}, actor="ops")
        forgotten = store.start_run("forgotten", agent_id="a", state={"s": MARKER})
        purged = store.start_run("purged", agent_id="a", state={"s": MARKER})
        store.complete_run(purged.run_id, {})
        clock.advance(2 * DAY)
        keeping.forget(store._service, forgotten.run_id, actor="crashed", reason="erasure")
        keeping.purge(store._service, purged.run_id, actor="crashed")
        store.projector().catch_up()
        keys = store._holding.keys
        store._purger._delete([purged.run_id], store.projector())
        keys.table.add(purged.run_id, StoredKey("k1", b"left by the crash"))  # its key remains
        assert keys.present([forgotten.run_id, purged.run_id]) == {
            forgotten.run_id: True,
            purged.run_id: True,
        }
        store.apply_retention(actor="ops")
        assert keys.present([forgotten.run_id, purged.run_id]) == {forgotten.run_id: False}


def test_purging_a_child_keeps_the_parents_record_of_starting_it(
    store: actae.Store, clock: actae.ManualClock
) -> None:
    store.set_retention({"completed": "1d"}, actor="ops")
    parent = store.start_run("parent", agent_id="a", state={})
    child = store.start_run(
        "child", agent_id="a", state={}, parent_run_id=parent.run_id, operation_id="start-child"
    )
    store.complete_run(child.run_id, {})
    clock.advance(2 * DAY)
    assert store.apply_retention(actor="ops").purged == [child.run_id]
    record = store.operation("start-child")
    assert record is not None
    assert record.result["run_id"] == str(child.run_id)


def test_runs_retention_keeps_do_not_crowd_out_the_due_ones(
    store: actae.Store, clock: actae.ManualClock
) -> None:
    store.set_retention({"completed": "1d"}, actor="ops")
    store.set_retention(None, agent="ledger", actor="ops")
    for n in range(3):
        kept = store.start_run(f"kept-{n}", agent_id="ledger", state={})
        store.complete_run(kept.run_id, {})
        held = store.start_run(f"held-{n}", agent_id="a", state={})
        store.complete_run(held.run_id, {})
        store.hold(held.run_id, actor="legal", reason="case")
    clock.advance(DAY)
    due = store.start_run("due", agent_id="a", state={})
    store.complete_run(due.run_id, {})
    clock.advance(2 * DAY)
    report = store.apply_retention(actor="ops", limit=1)
    assert report.purged == [due.run_id]


@pytest.mark.postgres
def test_a_steps_error_stays_sealed_when_its_retries_run_out(pg_url: str, tmp_path: Path) -> None:
    url = with_option(pg_url, "keyring", str(keyring_file(tmp_path)))
    policy = actae.RetryPolicy(max_attempts=1)
    with actae.open(url) as store:
        run = store.start_run("wf", agent_id="a", state={})

        def fails() -> None:
            raise RuntimeError(f"the tool said {MARKER}")

        with pytest.raises((actae.RunStoppedError, RuntimeError)):
            store.resume(run.run_id, worker="w").step("call", fails, retry=policy)
        assert MARKER in (store.run(run.run_id).error or "")
        store.projector().catch_up()
    tables = every_table_text(url)
    assert [name for name, text in tables.items() if contains_marker(text)] == []
