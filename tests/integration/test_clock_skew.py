"""Workers whose hosts' clocks are an hour off still share leases, timers and retry delays.

Two worker processes on PostgreSQL: one whose wall clock runs an hour slow, one an hour fast
(``skewed_worker.py`` patches the library's single wall-clock read). The slow one holds an
idempotent effect and a run, sets a timer and is told Retry-After; the fast one is the
worker that would steal expired-looking leases and fire the timer or the retry too early.
Every tool call and step is timed from outside Actae, on this host's real clock.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import actae
from tests.helpers import wait_for

pytestmark = pytest.mark.postgres

HERE = Path(__file__).parent
TIMEOUT = 20.0
HOUR = 3600.0
SLEEP = 3.0  # skew_workflows.SLEEP
RETRY_AFTER = 3.0  # skew_workflows.RETRY_AFTER
EARLY = 0.05
"""Seconds a timer or retry may seem early: the database clock's error plus logging jitter."""
LATE = 1.5
"""Seconds a timer or retry may fire late: a few worker passes and read-model catch-ups."""


def calls(path: Path, what: str) -> list[tuple[str, float]]:
    """(worker, real time) of each logged call of this kind, oldest first."""
    if not path.exists():
        return []
    with sqlite3.connect(path, timeout=30) as db:
        found = db.execute("SELECT 1 FROM sqlite_master WHERE name = 'calls'").fetchone()
        if found is None:
            return []
        rows = db.execute("SELECT worker, at FROM calls WHERE what = ? ORDER BY at", (what,))
        return [(str(worker), float(at)) for worker, at in rows]


def two_more_passes(store: actae.Store, worker: str) -> None:
    """Wait until ``worker`` has begun two more passes (it renews its advertisement then)."""
    statement = "SELECT max(seen_until) AS until FROM actae_worker_agents WHERE worker = %s"

    def advertised() -> object:
        return store.projector().query(statement, (worker,))[0]["until"]

    for _ in range(2):
        seen = advertised()

        def renewed(seen: object = seen) -> bool:
            return advertised() != seen

        wait_for(renewed, f"{worker} to renew its advertisement")


@contextmanager
def skewed_worker(url: str, name: str, skew: float, folder: Path) -> Iterator[Path]:
    """A worker process whose host clock is ``skew`` seconds off; yields its log file."""
    log = folder / f"{name}.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                str(HERE / "skewed_worker.py"),
                str(skew),
                "--db",
                url,
                "--import",
                str(HERE / "skew_workflows.py"),
                "--name",
                name,
                "--lease",
                "2",
                "--poll-interval",
                "0.05",
            ],
            env={
                **os.environ,
                "ACTAE_TEST_CALLS": str(folder / "calls.db"),
                "ACTAE_TEST_RELEASE": str(folder / "release"),
            },
            stderr=out,
            text=True,
        )
        try:
            yield log
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def test_workers_an_hour_apart_share_leases_timers_and_retry_delays(
    pg_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "calls.db"
    with actae.open(pg_url) as store:
        # In this order the slow worker is told Retry-After, sets the timer, then holds the
        # charge (and its run) until the test lets it go.
        throttled = store.start_run("throttled", agent_id="throttled", state={})
        sleeper = store.start_run("sleeper", agent_id="sleeper", state={})
        holder = store.start_run("holder", agent_id="holder", state={})
        runs = (throttled, sleeper, holder)
        with skewed_worker(pg_url, "slow", -HOUR, tmp_path) as slow_log:
            wait_for(lambda: calls(log, "charge"), "the slow worker to hold the charge")
            with skewed_worker(pg_url, "fast", HOUR, tmp_path) as fast_log:
                wait_for(lambda: "working on" in fast_log.read_text(), "the fast worker")
                fast_ready_at = time.time()
                # Only the fast worker is free to retry: by the time the retry is due it has
                # had many passes over the held run and the sleeping one.
                wait_for(lambda: len(calls(log, "call")) >= 2, "the retry of the throttled call")
                wait_for(lambda: calls(log, "woke"), "the timer")
                two_more_passes(store, "fast")  # one of them entirely over the held run
                (tmp_path / "release").touch()
                wait_for(
                    lambda: all(
                        store.run(r.run_id).status is actae.RunStatus.COMPLETED for r in runs
                    ),
                    "every run to complete",
                )
                fast_said = fast_log.read_text()
            slow_said = slow_log.read_text()

        problems: list[str] = []

        def expect(holds: bool, problem: str) -> None:
            if not holds:
                problems.append(problem)

        charges = [worker for worker, _ in calls(log, "charge")]
        expect(charges == ["slow"], f"the charge's lease was shared: it ran in {charges}")
        charge = store.effect(f"{holder.run_id}:effect:charge:1")
        attempts = [(a.worker, a.outcome) for a in charge.attempts]
        expect(attempts == [("slow", "completed")], f"charge attempts: {attempts}")

        (first, first_at), *retries = calls(log, "call")
        expect(first == "slow" and len(retries) == 1, f"calls after the first: {retries}")
        waited = retries[0][1] - first_at
        expect(
            waited >= RETRY_AFTER - EARLY,
            f"Retry-After {RETRY_AFTER} s, retried after {waited:.2f} s",
        )
        due = max(first_at + RETRY_AFTER, fast_ready_at)  # the slow worker is busy meanwhile
        expect(retries[0][1] <= due + LATE, f"the retry came {retries[0][1] - due:.2f} s late")
        outcomes = [a.outcome for a in store.effect(f"{throttled.run_id}:effect:call:1").attempts]
        expect(outcomes == ["failed", "completed"], f"throttled call attempts: {outcomes}")

        ((setter, slept_at),), ((_, woke_at),) = calls(log, "slept"), calls(log, "woke")
        expect(setter == "slow", f"the timer was set by {setter}")
        expect(
            woke_at - slept_at >= SLEEP - EARLY,
            f"a {SLEEP} s timer fired after {woke_at - slept_at:.2f} s",
        )
        due = max(slept_at + SLEEP, fast_ready_at)
        expect(woke_at <= due + LATE, f"the timer fired {woke_at - due:.2f} s late")

        expect("ahead of the database's" in fast_said, "the fast worker did not warn")
        expect("behind the database's" in slow_said, "the slow worker did not warn")
        assert not problems, "\n".join(problems)
