"""Contract: a run's lease survives database errors, and is never used once it may be lost.

A terminated backend (``pg_terminate_backend``, a pooler restart) used to kill the lease's
heartbeat thread: the lease lapsed while the step was still running, and a second worker
started the same step beside it. These tests break only the worker's own connections on
the shared server, so nothing else running there is disturbed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

import actae
from actae.adapters.runtime.run_lease import RunLeases
from actae.adapters.runtime.worker import run_until_idle
from tests.helpers import called, wait_for

pytestmark = pytest.mark.postgres

LEASE = 1.2
"""Seconds: short, so that a heartbeat that died shows within a few seconds."""
DEADLINE = 20.0


@pytest.fixture
def admin(pg_dsn: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        yield conn


@contextmanager
def a_step_running(
    pg_url: str, lease: float
) -> Iterator[tuple[actae.Store, actae.Store, actae.RunInfo, list[str]]]:
    """A worker in a thread inside a long step of its run, and a rival store beside it.

    Yields ``(store, rival, run, calls)`` once the step runs; on leaving, the step ends and
    the run must have completed.
    """
    calls: list[str] = []
    started, finish = threading.Event(), threading.Event()
    workflows = actae.Registry()

    @workflows.workflow("slow")
    def slow(ctx: actae.RunContext) -> None:
        def long_step() -> int:
            calls.append("long")
            started.set()
            finish.wait(DEADLINE)
            return 1

        ctx.step("long", long_step)

    with actae.open(pg_url) as store, actae.open(pg_url) as rival:
        run = store.start_run("r", agent_id="slow", state={})
        worker = actae.Worker(store, name="w1", registry=workflows, lease=lease)
        thread = threading.Thread(target=run_until_idle, args=(worker,), daemon=True)
        thread.start()
        wait_for(started.is_set, "the step to start")
        yield store, rival, run, calls
        finish.set()
        thread.join(DEADLINE)
        assert not thread.is_alive()
        assert store.run(run.run_id).status is actae.RunStatus.COMPLETED


def terminate(admin: psycopg.Connection[Any], store: actae.Store) -> int:
    """End the backends of the store's idle pooled connections (where run leases renew).

    How many were ended (the one lent at that moment, if any, is left alone).
    """
    datastore = store._service.recorder.datastore  # type: ignore[attr-defined]
    idle = datastore.pool._pool  # psycopg_pool's idle connections
    pids = [conn.info.backend_pid for conn in list(idle) if not conn.closed]
    for pid in pids:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    return len(pids)


def test_a_terminated_connection_does_not_let_a_running_steps_lease_lapse(
    pg_url: str, admin: psycopg.Connection[Any]
) -> None:
    with a_step_running(pg_url, LEASE) as (store, rival, run, calls):
        terminated = 0
        watch_until = time.monotonic() + 3 * LEASE
        while time.monotonic() < watch_until:  # three lease lengths, killing it repeatedly
            terminated += bool(terminate(admin, store))
            now = rival.now()
            taken = RunLeases(rival.projector().db).acquire(
                run.run_id, "rival", now, now + timedelta(seconds=LEASE)
            )
            assert taken is None, "the lease lapsed while its step was still running"
            time.sleep(LEASE / 4)  # pacing of the observation, not synchronisation
    assert terminated >= 3
    assert calls == ["long"]


def test_a_lease_lost_in_an_outage_stops_the_run_at_the_next_step_boundary(
    pg_url: str, admin: psycopg.Connection[Any]
) -> None:
    calls: list[str] = []
    locked, lost = threading.Event(), threading.Event()
    workflows = actae.Registry()

    @workflows.workflow("two-steps")
    def two_steps(ctx: actae.RunContext) -> None:
        ctx.step("first", lambda: called(calls, "first", 1))
        if not lost.is_set():  # the first pass: wait until its lease may be someone else's
            locked.wait(DEADLINE)
            assert ctx.lease is not None
            wait_for(lambda: ctx.lease is not None and ctx.lease.lost, "the lease to be lost")
            lost.set()
        ctx.step("second", lambda: called(calls, "second", 2))

    with actae.open(pg_url) as store:
        run = store.start_run("r", agent_id="two-steps", state={})
        worker = actae.Worker(store, name="w1", registry=workflows, lease=LEASE)
        thread = threading.Thread(target=worker.run_once, daemon=True)
        thread.start()
        schema = pg_url.rsplit("schema=", 1)[1]
        wait_for(lambda: calls == ["first"], "the first step")
        with admin.transaction():  # renewals block: the heartbeat cannot reach its table
            admin.execute(
                sql.SQL("LOCK TABLE {}.actae_run_leases IN ACCESS EXCLUSIVE MODE").format(
                    sql.Identifier(schema)
                )
            )
            locked.set()
            wait_for(lost.is_set, "the workflow to see its lease lost")
        thread.join(DEADLINE)  # its heartbeat, blocked on the lock until now, lets go
        assert not thread.is_alive()
        assert calls == ["first"], "a step ran after its worker's lease may have been lost"
        assert "lease lost" in worker.outcomes[-1][1]
        kinds = [event.kind for event in store.events(run.channel_id)]
        assert kinds.count("step.result") == 1

        wait_for(lambda: run_once_completes(worker, run.run_id, store), "the run to finish")
        assert calls == ["first", "second"]


def run_once_completes(worker: actae.Worker, run_id: Any, store: actae.Store) -> bool:
    """One more pass (the lost lease has expired by now); whether the run completed."""
    worker.run_once()
    return store.run(run_id).status is actae.RunStatus.COMPLETED


def test_a_renewal_whose_backend_is_terminated_mid_statement_is_retried(
    pg_url: str, admin: psycopg.Connection[Any]
) -> None:
    """The pool replaces a terminated idle connection before lending it, so the renewal
    itself must meet the error: it waits on a row lock the test holds, and its backend is
    ended while it waits. The heartbeat retries on a new connection; the lease holds."""
    lease = 6.0  # long enough that one renewal blocked for a moment does not lapse it
    schema = pg_url.rsplit("schema=", 1)[1]
    leases = sql.SQL("SELECT 1 FROM {}.actae_run_leases WHERE run_id = %s FOR UPDATE").format(
        sql.Identifier(schema)
    )
    expiry = sql.SQL("SELECT expires_at FROM {}.actae_run_leases WHERE run_id = %s").format(
        sql.Identifier(schema)
    )
    blocked = "SELECT pid FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))"
    with a_step_running(pg_url, lease) as (_, rival, run, _):
        with admin.transaction():
            admin.execute(leases, (run.run_id,))
            me = admin.info.backend_pid
            wait_for(lambda: admin.execute(blocked, (me,)).fetchall(), "a renewal to wait")
            for (pid,) in admin.execute(blocked, (me,)).fetchall():
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        # A renewal reckoned after the kill lands only if the heartbeat outlived the error.
        renewed_past = rival.now() + timedelta(seconds=lease)
        wait_for(
            lambda: admin.execute(expiry, (run.run_id,)).fetchall() > [(renewed_past,)],
            "a renewal after the backend was ended",
        )
        now = rival.now()
        taken = RunLeases(rival.projector().db).acquire(
            run.run_id, "rival", now, now + timedelta(seconds=lease)
        )
        assert taken is None, "the lease lapsed after one renewal's backend was ended"
