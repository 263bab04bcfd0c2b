"""Chaos: PostgreSQL restarts, crashes and terminated sessions under running processes.

Two ``actae worker`` processes and one ``actae project`` process work through a dozen
multi-step runs while the test restarts the server (once cleanly, once by SIGKILL to its
postmaster) and terminates every session three times. Afterwards every process must still
be alive, every run completed, every step function and every payment run exactly once (from
the call log and the provider's own ledger), and the read models equal a rebuild from zero.

The figures (each outage, and per process the time from the server being back to its first
new session and, for workers, its first new call) are printed and written to
``chaos-figures.json`` in the test's tmp folder (and to ``$CHAOS_FIGURES`` if set).
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest

import actae
from actae.adapters.drill.db_faults import DatabaseServer

HERE = Path(__file__).parent
RUNS = 12
STEPS = 5
CALLS = RUNS * (STEPS + 1)  # every step and one payment per run
SCHEDULE = ("restart", "terminate", "crash", "terminate", "terminate")
CALLS_BEFORE_FIRST_FAULT = 6
CALLS_BETWEEN_FAULTS = 4
LEASE = 8.0
TIMEOUT = 90.0
RECONNECT_WITHIN = 30.0
POLL = 0.02

_spec = importlib.util.spec_from_file_location(
    "chaos_test_provider", HERE.parent / "integration" / "provider.py"
)
assert _spec is not None
assert _spec.loader is not None
PROVIDER = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(PROVIDER)


class Process:
    """An Actae CLI process with its stderr in a file (its tail goes into failure messages)."""

    def __init__(self, name: str, command: list[str], env: dict[str, str], folder: Path) -> None:
        self.name = name
        self.log = folder / f"{name}.log"
        # PGAPPNAME names every session the process opens, so pg_stat_activity shows
        # when it is connected again after an outage.
        self.popen = subprocess.Popen(
            command, env={**env, "PGAPPNAME": name}, stderr=self.log.open("w"), text=True
        )

    def ready(self) -> bool:
        """Whether it said it is working (a worker) or caught up (the projector)."""
        said = self.log.read_text(errors="replace")
        return "working on" in said or "caught up" in said

    def tail(self, lines: int = 20) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def died(self) -> str | None:
        """Why the process is no longer running, with its stderr tail; None while it runs."""
        code = self.popen.poll()
        if code is None:
            return None
        return f"{self.name} died (exit status {code}); its stderr ends with:\n{self.tail()}"


class Chaos:
    """The processes, the server and the call log of one chaos test."""

    def __init__(self, url: str, folder: Path, *, lease: float = LEASE) -> None:
        self.url, self.folder, self.lease = url, folder, lease
        self.server = DatabaseServer(url)
        self.call_log = folder / "calls.jsonl"
        self.call_log.touch()
        self.processes: list[Process] = []

    def start(self) -> None:
        env = {
            **os.environ,
            "CHAOS_CALL_LOG": str(self.call_log),
            "CHAOS_PROVIDER": str(self.folder / "provider.db"),
            "CHAOS_STEPS": str(STEPS),
        }
        cli = [sys.executable, "-m", "actae.adapters.cli"]
        self.processes.append(
            Process("chaos-projector", [*cli, "project", "--db", self.url], env, self.folder)
        )
        for name in ("chaos-w1", "chaos-w2"):
            command = [
                *cli,
                "worker",
                "--db",
                self.url,
                "--import",
                str(HERE / "chaos_workflows.py"),
                "--name",
                name,
                "--lease",
                str(self.lease),
                "--poll-interval",
                "0.05",
            ]
            self.processes.append(Process(name, command, env, self.folder))
        for process in self.processes:
            self.wait_for(process.ready, f"{process.name} to start")

    def check_runs(self, store: actae.Store, runs: list[actae.RunInfo]) -> bool:
        """Whether every run completed; fails at once when one failed."""
        infos = [store.run(r.run_id) for r in runs]
        if failed := [i for i in infos if i.status is actae.RunStatus.FAILED]:
            pytest.fail(f"{len(failed)} runs failed, e.g. {failed[0].run_id}: {failed[0].error}")
        return all(i.status is actae.RunStatus.COMPLETED for i in infos)

    def calls(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.call_log.read_text().splitlines()]

    def check_alive(self) -> None:
        for process in self.processes:
            if (why := process.died()) is not None:
                pytest.fail(why)

    def wait_for(self, condition: Callable[[], bool], what: str, within: float = TIMEOUT) -> None:
        """Poll ``condition`` until it holds; fail at once if a process died, or at the deadline.

        A condition that reads the database while it is down counts as not yet true.
        """
        deadline = time.monotonic() + within
        while True:
            self.check_alive()
            try:
                if condition():
                    return
            except (psycopg.Error, actae.ActaeError, OSError) as error:
                if time.monotonic() > deadline:
                    raise
                del error  # the server is still coming back
            if time.monotonic() > deadline:
                tails = "\n".join(f"--- {p.name}:\n{p.tail(8)}" for p in self.processes)
                pytest.fail(f"timed out after {within:g} s waiting for {what}\n{tails}")
            time.sleep(POLL)  # polling other processes' progress, with a deadline

    def sessions_since(self, moment: float) -> dict[str, float]:
        """Per process, when its first session opened at or after ``moment`` (epoch seconds)."""
        with psycopg.connect(self.server.dsn, autocommit=True, connect_timeout=2) as conn:
            rows = conn.execute(
                "SELECT application_name, min(extract(epoch FROM backend_start))::float8 "
                "FROM pg_stat_activity WHERE backend_start >= to_timestamp(%s) "
                "GROUP BY application_name",
                (moment,),
            ).fetchall()
        return {name: first for name, first in rows}

    def fault(self, kind: str) -> dict[str, Any]:
        """Inject ``kind``; wait until every process has a new session; the figures."""
        outage = self.server.inject(kind)
        # The server accepts again when its new postmaster started; terminated sessions may
        # reconnect at once, while the terminations are still going on.
        back = (outage.started if kind == "terminate" else outage.ended).timestamp()
        first: dict[str, float] = {}

        def everyone_reconnected() -> bool:
            first.update(self.sessions_since(outage.started.timestamp()))
            return all(p.name in first for p in self.processes)

        self.wait_for(everyone_reconnected, f"every process to reconnect after {kind}",
                      within=RECONNECT_WITHIN)  # fmt: skip
        return {
            **outage.as_dict(),
            "measured_from": "started" if kind == "terminate" else "ended",
            "reconnected_after_seconds": {
                p.name: round(first[p.name] - back, 3) for p in self.processes
            },
        }

    def stop(self) -> None:
        for process in self.processes:
            if process.popen.poll() is None:
                process.popen.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                process.popen.wait(20)
            except subprocess.TimeoutExpired:
                process.popen.kill()
                process.popen.wait()


def each_function_ran_once(
    calls: list[dict[str, Any]], runs: list[actae.RunInfo], *, context: str = ""
) -> None:
    """Every step and the charge of every run was called, and none more than once."""
    counted = Counter((c["run"], c["call"]) for c in calls)
    expected = {
        (str(r.run_id), call)
        for r in runs
        for call in [*(f"step-{n}" for n in range(STEPS)), "charge"]
    }
    assert set(counted) == expected
    twice = [c for c in calls if counted[c["run"], c["call"]] > 1]
    assert twice == [], f"functions ran more than once: {twice}; {context}"


def first_call_after(calls: list[dict[str, Any]], worker: str, moment: float) -> float | None:
    later = [c["at"] for c in calls if c["worker"] == worker and c["at"] >= moment]
    return round(min(later) - moment, 3) if later else None


def test_processes_ride_out_restarts_crashes_and_terminated_sessions(
    chaos_url: str, tmp_path: Path
) -> None:
    began = time.monotonic()
    with actae.open(chaos_url) as store:
        store.projector()  # the read-model tables exist before three processes race for them
        runs = [
            store.start_run(f"chaos-{n}", agent_id="chaos", state={}, operation_id=f"chaos:{n}")
            for n in range(RUNS)
        ]
    chaos = Chaos(chaos_url, tmp_path)
    faults: list[dict[str, Any]] = []
    try:
        chaos.start()
        with actae.open(chaos_url) as store:
            needed = CALLS_BEFORE_FIRST_FAULT
            for kind in SCHEDULE:
                goal = min(needed, CALLS)

                def progressed(goal: int = goal) -> bool:
                    return len(chaos.calls()) >= goal or chaos.check_runs(store, runs)

                chaos.wait_for(progressed, f"{goal} calls before {kind}")
                faults.append(chaos.fault(kind))
                needed = len(chaos.calls()) + CALLS_BETWEEN_FAULTS

            chaos.wait_for(lambda: chaos.check_runs(store, runs), "every run to complete")
            target = store._service.recorder.max_notification_id()
            chaos.wait_for(lambda: store.projector().position() == target, "read models")
            chaos.check_alive()
            for process in chaos.processes:
                process.popen.send_signal(signal.SIGTERM)
                assert process.popen.wait(20) == 0, f"{process.name}:\n{process.tail()}"

            live = store.projector().db.snapshot()
            store.projector().rebuild()
            rebuilt = store.projector().db.snapshot()
    finally:
        chaos.stop()

    calls = chaos.calls()
    each_function_ran_once(calls, runs, context=f"faults: {faults}")
    provider = PROVIDER.MockProvider(tmp_path / "provider.db")
    assert (provider.charges(), provider.requests()) == (RUNS, RUNS), "a payment ran twice"
    assert live == rebuilt

    for fault in faults:
        back = datetime.fromisoformat(fault[fault["measured_from"]]).timestamp()
        fault["next_call_after_seconds"] = {
            name: first_call_after(calls, name, back) for name in ("chaos-w1", "chaos-w2")
        }
    figures = {
        "runs": RUNS,
        "steps_per_run": STEPS,
        "calls": len(calls),
        "faults": faults,
        "total_seconds": round(time.monotonic() - began, 1),
    }
    report = json.dumps(figures, indent=2)
    (tmp_path / "chaos-figures.json").write_text(report)
    if target_file := os.environ.get("CHAOS_FIGURES"):
        Path(target_file).write_text(report)
    print(report)
