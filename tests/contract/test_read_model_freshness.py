"""Contract: the read models tell the truth as of the store's clock, on every backend.

A claim whose lease ran out shows in doubt as soon as the lease expiry passes (catch-up,
live projector, worker pass), and rebuilding at the same moment gives the same tables; a
worker pass leaves run_status current; run leases join run_status; tables made by an
older Actae are upgraded when the read models are opened (columns, tables, views, indexes,
id types).
"""

from __future__ import annotations

import time
from typing import Any

import actae

LEASE = 10.0
TIMEOUT = 30.0


def effect_row(projector: actae.Projector, key: str) -> dict[str, Any]:
    (row,) = projector.query(f"SELECT * FROM effects WHERE effect_key = '{key}'")
    return row


def run_row(projector: actae.Projector, run: actae.RunInfo) -> dict[str, Any]:
    (row,) = [
        r
        for r in projector.query("SELECT * FROM run_status")
        if str(r["run_id"]) == str(run.run_id)
    ]
    return row


def doubt(projector: actae.Projector, run: actae.RunInfo, key: str) -> tuple[Any, ...]:
    """What an operator reads: is the effect in doubt, and what should happen next."""
    row = run_row(projector, run)
    return bool(effect_row(projector, key)["in_doubt"]), row["status"], row["next_action"]


def test_a_claim_whose_lease_ran_out_shows_in_doubt_on_the_store_clock(
    store: actae.Store, clock: actae.ManualClock
) -> None:
    run = store.start_run("pay", agent_id="a", state={})
    store.claim("charge", run_id=run.run_id, worker="w3", lease=LEASE)
    projector = store.projector()
    projector.catch_up()
    assert doubt(projector, run, "charge") == (False, "running", "continue")

    clock.advance(LEASE)  # the ledger holds it in doubt from its expiry on
    assert store.effect("charge").in_doubt
    assert run_row(projector, run)["in_doubt_effects"] == 0
    projector.catch_up()

    assert doubt(projector, run, "charge") == (True, "running", "reconcile effect charge")
    assert run_row(projector, run)["in_doubt_effects"] == 1
    incremental = projector.db.snapshot()
    projector.rebuild()
    assert projector.db.snapshot() == incremental  # at the same moment


def test_a_late_heartbeat_and_a_settlement_clear_the_doubt(
    store: actae.Store, clock: actae.ManualClock
) -> None:
    run = store.start_run("pay", agent_id="a", state={})
    first = store.claim("charge", run_id=run.run_id, worker="w3", lease=LEASE)
    projector = store.projector()
    clock.advance(LEASE + 1)
    projector.catch_up()
    assert doubt(projector, run, "charge")[0] is True

    store.heartbeat("charge", token=first.token, worker="w3", lease=LEASE)  # w3 was slow, not dead
    projector.catch_up()
    assert doubt(projector, run, "charge") == (False, "running", "continue")

    clock.advance(LEASE + 1)
    second = store.claim("charge", run_id=run.run_id, worker="w1", lease=LEASE)
    assert second.in_doubt
    projector.catch_up()
    assert doubt(projector, run, "charge") == (True, "running", "reconcile effect charge")
    assert run_row(projector, run)["in_doubt_effects"] == 1
    store.reconcile("charge", "completed", actor="w1", token=second.token, result={"ok": 1})
    projector.catch_up()
    assert doubt(projector, run, "charge") == (False, "running", "continue")
    assert run_row(projector, run)["in_doubt_effects"] == 0
    incremental = projector.db.snapshot()
    projector.rebuild()
    assert projector.db.snapshot() == incremental


def test_the_live_projector_marks_an_expired_claim_without_new_events(
    store: actae.Store, clock: actae.ManualClock
) -> None:
    run = store.start_run("pay", agent_id="a", state={})
    store.claim("charge", run_id=run.run_id, worker="w3", lease=LEASE)
    projector = store.projector()
    projector.catch_up()
    projector.start()
    try:
        clock.advance(LEASE)
        deadline = time.monotonic() + TIMEOUT
        while not doubt(projector, run, "charge")[0] and time.monotonic() < deadline:
            time.sleep(0.01)  # polling a condition (the projected row) with a deadline
    finally:
        projector.stop()

    assert doubt(projector, run, "charge") == (True, "running", "reconcile effect charge")


def test_a_worker_pass_marks_expired_claims_and_leaves_run_status_current(
    store: actae.Store, clock: actae.ManualClock
) -> None:
    workflows = actae.Registry()
    workflows.workflow("quick")(lambda ctx: {"done": True})
    stuck = store.start_run("stuck", agent_id="other", state={})
    store.claim("charge", run_id=stuck.run_id, worker="w3", lease=LEASE)
    quick = store.start_run("quick", agent_id="quick", state={})
    clock.advance(LEASE)

    actae.Worker(store, name="w1", registry=workflows).run_once()

    projector = store.projector()  # read as `actae worker --once` leaves it: no catch-up
    row = run_row(projector, quick)
    assert (row["status"], row["next_action"]) == ("completed", "none")
    assert effect_row(projector, "charge")["in_doubt"]
    assert run_row(projector, stuck)["next_action"] == "reconcile effect charge"


def test_run_leases_join_run_status(store: actae.Store) -> None:
    workflows = actae.Registry()
    workflows.workflow("quick")(lambda ctx: {"done": True})
    run = store.start_run("quick", agent_id="quick", state={})
    actae.Worker(store, name="w1", registry=workflows).run_once()

    rows = store.projector().query(
        "SELECT s.run_id, s.status, l.worker FROM run_status s "
        "JOIN actae_run_leases l ON l.run_id = s.run_id"
    )

    assert [(str(r["run_id"]), r["status"], r["worker"]) for r in rows] == [
        (str(run.run_id), "completed", "w1")
    ]


def test_a_failed_run_says_what_to_fix_until_it_is_retried(store: actae.Store) -> None:
    run = store.start_run("f", agent_id="a", state={})
    store.fail_run(run.run_id, "step 'draft': result is not plain JSON", actor="w1")
    projector = store.projector()
    projector.catch_up()
    row = run_row(projector, run)
    assert (row["status"], row["error"], row["next_action"]) == (
        "failed",
        "step 'draft': result is not plain JSON",
        "fix and retry: step 'draft': result is not plain JSON",
    )

    store.retry_run(run.run_id, actor="ops", reason="fixed the step")
    projector.catch_up()

    row = run_row(projector, run)
    assert (row["status"], row["error"], row["next_action"]) == ("running", None, "continue")
    incremental = projector.db.snapshot()
    projector.rebuild()
    assert projector.db.snapshot() == incremental
