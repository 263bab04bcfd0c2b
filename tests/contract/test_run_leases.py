"""Contract: a run's lease (``actae_run_leases``) keeps other workers out while it is live.

Workers take a run under a lease before running its workflow code, renew it while they work
and release it when they stop. A second worker gets the run only once the lease has run out
(at its expiry time, as an effect's lease), with a new token; the old holder's token then
renews and releases nothing.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import actae
from actae.adapters.runtime.run_lease import RunLeases
from actae.adapters.runtime.worker import run_until_idle

LEASE = timedelta(seconds=30)


def test_a_second_worker_does_not_get_a_live_lease(
    store: actae.Store, clock: actae.ManualClock
) -> None:
    run = store.start_run("wf", agent_id="a", state={})
    db = store.projector().db
    leases = RunLeases(db)

    first = leases.acquire(run.run_id, "w1", clock(), clock() + LEASE)
    refused_now = leases.acquire(run.run_id, "w2", clock(), clock() + LEASE)
    clock.advance(LEASE.total_seconds() - 0.001)
    refused_later = leases.acquire(run.run_id, "w2", clock(), clock() + LEASE)

    assert (first, refused_now, refused_later) == (1, None, None)
    assert db.query("SELECT worker, token FROM actae_run_leases") == [{"worker": "w1", "token": 1}]


def test_a_lease_is_taken_over_at_its_expiry_with_a_new_token(
    store: actae.Store, clock: actae.ManualClock
) -> None:
    run = store.start_run("wf", agent_id="a", state={})
    db = store.projector().db
    leases = RunLeases(db)
    start = clock()
    leases.acquire(run.run_id, "w1", start, start + LEASE)

    clock.advance(LEASE.total_seconds())  # now == expires_at: the lease is over
    second = leases.acquire(run.run_id, "w2", clock(), clock() + LEASE)

    assert second == 2
    assert db.query("SELECT worker, token FROM actae_run_leases") == [{"worker": "w2", "token": 2}]


def test_the_old_holder_neither_renews_nor_releases_the_new_lease(
    store: actae.Store, clock: actae.ManualClock
) -> None:
    run = store.start_run("wf", agent_id="a", state={})
    db = store.projector().db
    leases = RunLeases(db)
    leases.acquire(run.run_id, "w1", clock(), clock() + LEASE)
    clock.advance(LEASE.total_seconds())
    leases.acquire(run.run_id, "w2", clock(), clock() + LEASE)

    renewed = leases.renew(run.run_id, 1, clock() + 10 * LEASE)
    leases.release(run.run_id, 1, clock())
    third = leases.acquire(run.run_id, "w3", clock(), clock() + LEASE)

    assert (renewed, third) == (False, None)
    assert leases.renew(run.run_id, 2, clock() + LEASE) is True
    clock.advance(LEASE.total_seconds() - 0.001)
    assert leases.acquire(run.run_id, "w3", clock(), clock() + LEASE) is None


def test_a_worker_leaves_a_run_alone_while_another_holds_its_lease(
    store: actae.Store, clock: actae.ManualClock
) -> None:
    ran: list[str] = []
    workflows = actae.Registry()

    @workflows.workflow("a")
    def note(ctx: actae.RunContext) -> dict[str, Any]:
        ran.append(ctx.worker)
        return {}

    run = store.start_run("wf", agent_id="a", state={})
    db = store.projector().db
    leases = RunLeases(db)
    leases.acquire(run.run_id, "w1", clock(), clock() + LEASE)  # w1 works on it elsewhere
    worker = actae.Worker(store, name="w2", registry=workflows)

    run_until_idle(worker)
    assert (ran, store.run(run.run_id).status) == ([], actae.RunStatus.RUNNING)

    clock.advance(LEASE.total_seconds())
    run_until_idle(worker)
    assert (ran, store.run(run.run_id).status) == (["w2"], actae.RunStatus.COMPLETED)
