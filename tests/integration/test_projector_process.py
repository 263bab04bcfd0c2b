"""The projector as its own process: SIGKILL mid-batch, restart, concurrency, lost connections."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import psycopg
import pytest

import actae
from actae.adapters.readside.readmodels import ReadModelDB

TIMEOUT = 60
PROJECT = [sys.executable, "-m", "actae.adapters.cli", "project"]


def backlog(store: actae.Store, runs: int, events: int) -> None:
    """Several runs with many events and some effects."""
    for r in range(runs):
        run = store.start_run(f"wf-{r % 3}", agent_id="a", state={"r": r})
        for n in range(1, events):
            store.record(run.channel_id, kind="k", payload={"n": n}, expected_cursor=n)
        claim = store.claim(f"effect-{r}", run_id=run.run_id, worker="w", lease=30)
        if r % 2:
            store.complete_effect(f"effect-{r}", token=claim.token, worker="w", result={"r": r})
        else:
            store.fail_effect(
                f"effect-{r}", token=claim.token, worker="w", error="boom", final=r % 4 == 0
            )


def tracked(store: actae.Store) -> int:
    return store.projector().position()


def wait_for(condition: object, what: str) -> None:
    assert callable(condition)
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)  # polling a condition in another process, with a deadline


def test_projector_killed_mid_batch_restarts_with_exact_tables(durable_url: str) -> None:
    with actae.open(durable_url) as store:
        backlog(store, runs=12, events=150)
        target = store._service.recorder.max_notification_id()
        store.projector()  # creates the read-model tables before the race
        worker = subprocess.Popen(
            [*PROJECT, "--db", durable_url, "--batch-size", "40"], stderr=subprocess.DEVNULL
        )
        wait_for(lambda: tracked(store) > 0, "the first batch")
        os.kill(worker.pid, signal.SIGKILL)
        assert worker.wait(TIMEOUT) == -signal.SIGKILL
        killed_at = tracked(store)
        assert 0 < killed_at < (target or 0), "killed in the middle of the backlog"

        subprocess.run(
            [*PROJECT, "--db", durable_url, "--once"],
            check=True,
            stderr=subprocess.DEVNULL,
            timeout=TIMEOUT,
        )
        restarted = store.projector().db.snapshot()
        assert tracked(store) == target
        store.projector().rebuild()
        assert store.projector().db.snapshot() == restarted
        heads = {str(r["run_id"]): r["head_cursor"] for r in restarted["run_status"]}
        assert len(heads) == 12
        for row in restarted["run_status"]:
            assert heads[str(row["run_id"])] == store.head(row["channel_id"]).cursor


@pytest.mark.postgres
def test_two_projector_processes_never_apply_an_event_twice(pg_url: str) -> None:
    with actae.open(pg_url) as store:
        store.projector()
        workers = [
            subprocess.Popen(
                [*PROJECT, "--db", pg_url, "--batch-size", "25"],
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        for worker in workers:  # both are up and projecting before the backlog arrives
            assert worker.stderr is not None
            assert worker.stderr.readline().startswith("caught up")
        backlog(store, runs=8, events=60)
        target = store._service.recorder.max_notification_id()
        wait_for(lambda: tracked(store) == target, "both projectors to catch up")
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(TIMEOUT) == 0
        live = store.projector().db.snapshot()
        store.projector().rebuild()
        assert store.projector().db.snapshot() == live


@pytest.mark.postgres
def test_projector_survives_a_lost_database_connection(pg_url: str, pg_dsn: str) -> None:
    with actae.open(pg_url) as store:
        projector = store.projector()
        batches: list[int] = []  # the backend each batch committed on
        moved = projector.db.move_position

        def move_position(name: str, expected: int, position: int) -> int:
            batches.append(projector.db.conn.info.backend_pid)  # type: ignore[attr-defined]
            return moved(name, expected, position)

        projector.db.move_position = move_position  # type: ignore[method-assign]
        projector.start()
        run = store.start_run("wf", agent_id="a", state={})
        wait_for(lambda: projector.position() > 0, "the first batch")
        pid = batches[-1]
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        with actae.open(pg_url) as writer:  # its own pool: the dead connection is the projector's
            writer.record(run.channel_id, kind="after", payload={}, expected_cursor=1)
            target = writer._service.recorder.max_notification_id()
        wait_for(lambda: _position_via_new_connection(pg_url) == target, "recovery")
        projector.stop()
        assert batches[-1] != pid


def _position_via_new_connection(url: str) -> int:
    with actae.open(url) as other:
        return other.projector().position()


def test_project_command_stops_on_sigterm(durable_url: str) -> None:
    with actae.open(durable_url) as store:
        store.start_run("wf", agent_id="a", state={})
    worker = subprocess.Popen([*PROJECT, "--db", durable_url], stderr=subprocess.PIPE, text=True)
    assert worker.stderr is not None
    assert worker.stderr.readline().startswith("caught up")
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(TIMEOUT) == 0


def test_project_command_stops_on_sigterm_during_its_first_catch_up(durable_url: str) -> None:
    with actae.open(durable_url) as store:
        backlog(store, runs=8, events=60)
    worker = subprocess.Popen(
        [*PROJECT, "--db", durable_url, "--batch-size", "5"], stderr=subprocess.PIPE, text=True
    )
    assert worker.stderr is not None
    assert worker.stderr.readline().startswith("  projected")  # catching up, batch by batch
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(TIMEOUT) == 0


@pytest.mark.postgres
def test_read_models_created_by_many_at_once(pg_url: str) -> None:
    """Workers and projectors that start together all find the read-model tables ready."""
    with actae.open(pg_url) as store:  # the event store's schema exists; the read models not
        dbs = [store._backend.read_models() for _ in range(6)]
        start = threading.Barrier(len(dbs))
        failures: list[BaseException] = []

        def create(db: ReadModelDB) -> None:
            start.wait()
            try:
                db.ensure_schema()
            except BaseException as error:  # reported below
                failures.append(error)

        threads = [threading.Thread(target=create, args=(db,)) for db in dbs]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for db in dbs:
            db.close()
    assert failures == []
