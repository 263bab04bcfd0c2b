"""``actae drill``: the failure drill practitioners judge durable execution by.

Start a five-agent workflow (a coordinator and its children: a payer, a sleeper, researchers,
a writer); one agent calls a mock payment provider that answers 429 with Retry-After first;
another pauses for 24 hours of virtual time; SIGKILL the coordinating worker process after K
of 7 state transitions; resume on other worker processes that roll out a state-schema
migration; inject duplicate queue deliveries. Then prove from durable history — the store's
channels and the provider's own ledger, never counters kept here — that nothing was billed
twice, lost, reordered or re-sampled, and how long recovery took.

Faults (``faults=``, not on the command line) break the guarantees on purpose, so tests can
prove the report sees a breach: ``payer-retries-in-doubt`` re-POSTs a charge in doubt instead
of reconciling it; ``provider-ignores-idempotency-keys`` executes every such POST.

Virtual time: every process reads one shared clock file. When nothing can progress (all runs
wait for a timer, a retry, or a dead worker's lease), the drill jumps the clock to the next
due moment, so a day passes in milliseconds and leases still mean something.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Collection
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

import actae
from actae.adapters.clock import OffsetClock
from actae.adapters.drill_report import Report, summarize, table

CRASH_POINTS = ("after-model-call", "during-commit", "after-charge-accepted", "while-waiting")
FAULTS = ("payer-retries-in-doubt", "provider-ignores-idempotency-keys")

STEPS = 7
LEASE = 10.0
TIMEOUT = 180.0
IDLE = 0.3
PINS_V1 = {"model": "mock-llm-1", "prompt": "drill-p1", "tools": "drill-t1", "schema": 1}


class DrillError(actae.ActaeError):
    """The drill could not run to its end (a process died, or it timed out)."""

    code = "drill"


class Drill:
    """One drill environment: store, clock, provider and worker processes."""

    def __init__(
        self,
        url: str,
        folder: Path,
        *,
        agents: int,
        seed: int,
        kill_after: int,
        out: TextIO,
        crash_point: str | None = None,
        duplicate_deliveries: int = 2,
        faults: Collection[str] = (),
    ) -> None:
        self.url, self.folder, self.agents = url, folder, agents
        self.seed, self.kill_after, self.out = seed, kill_after, out
        self.crash_point, self.duplicate_deliveries = crash_point, duplicate_deliveries
        self.faults = tuple(faults)
        self.clock = OffsetClock(str(folder / "clock"))
        self.store = actae.open(url, clock=self.clock)
        self.log = self.store.start_run(
            f"drill-log-{uuid.uuid4().hex[:8]}", agent_id="driver", state={}
        )
        self.provider, self.provider_url = self._start_provider()
        self.workers: list[subprocess.Popen[str]] = []
        self._last_position, self._last_change = -1, time.monotonic()
        self._dead: set[str] = set()  # workers the drill killed: only their leases are waited out

    # -- processes ------------------------------------------------------------------------

    def _start_provider(self) -> tuple[subprocess.Popen[str], str]:
        ignore_keys = "provider-ignores-idempotency-keys" in self.faults
        process = subprocess.Popen(  # noqa: S603 - our own module
            [
                sys.executable,
                "-m",
                "actae.adapters.drill_provider",
                str(self.folder / "provider.db"),
                *(["--ignore-idempotency-keys"] if ignore_keys else []),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert process.stdout is not None  # noqa: S101
        port = process.stdout.readline().split()[1]
        return process, f"http://127.0.0.1:{port}"

    def _start_worker(self, name: str, schema: int, crash: str = "") -> subprocess.Popen[str]:
        env = {
            "ACTAE_DRILL_CRASH": crash,
            "ACTAE_DRILL_CRASH_MARKER": str(self.folder / f"{name}.crashed"),
            **os.environ,
            "ACTAE_DRILL_PROVIDER": self.provider_url,
            "ACTAE_DRILL_SCHEMA": str(schema),
            "ACTAE_DRILL_FAULTS": ",".join(self.faults),
        }
        process = subprocess.Popen(  # noqa: S603 - our own CLI
            [
                sys.executable,
                "-m",
                "actae.adapters.cli",
                "worker",
                "--db",
                self.url,
                "--import",
                "actae.adapters.drill_workflows",
                "--name",
                name,
                "--lease",
                str(LEASE),
                "--poll-interval",
                "0.05",
                "--clock-file",
                str(self.folder / "clock"),
            ],
            env=env,
            stderr=(self.folder / f"{name}.log").open("w"),
            text=True,
        )
        self.workers.append(process)
        return process

    def _stop_workers(self) -> None:
        for process in self.workers:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.workers:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
        self.workers.clear()

    def close(self) -> None:
        """Stop every process and the store."""
        for process in [*self.workers, self.provider]:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in [*self.workers, self.provider]:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
        self.store.close()

    # -- one drill run --------------------------------------------------------------------

    def run_once(self, index: int) -> dict[str, Any]:
        """Run the scenario once and report on it from durable history."""
        workflow = f"drill-{self.seed}-{index}"
        coordinator = self._deliver(workflow)
        early = (self.duplicate_deliveries + 1) // 2  # the rest arrive after the crash
        for _ in range(early):
            self._deliver(workflow)
        first = self._start_worker(f"{workflow}-w1", schema=1, crash=self.crash_point or "")
        self._say(f"run {index + 1}: {self.agents}-agent workflow {workflow} started on w1")
        if self.crash_point:
            self._until(lambda: first.poll() is not None, f"w1 to die at {self.crash_point}")
            where = self.crash_point
        else:
            self._until(
                lambda: self._steps(coordinator) >= self.kill_after,
                f"{self.kill_after} coordinator transitions",
            )
            os.kill(first.pid, signal.SIGKILL)
            first.wait()
            where = f"after transition {self._steps(coordinator)} of {STEPS}"
        self._dead.add(f"{workflow}-w1")
        self.note(
            "drill.killed",
            {
                "workflow": workflow,
                "worker": f"{workflow}-w1",
                "after_transitions": self._steps(coordinator),
                "where": where,
            },
        )
        self._say(f"  killed w1 (SIGKILL) {where}; rolling out schema 2 on w2 and w3")
        for _ in range(self.duplicate_deliveries - early):
            self._deliver(workflow)
        for name in ("w2", "w3"):
            self._start_worker(f"{workflow}-{name}", schema=2)
        self._until(
            lambda: (
                self.store.run(coordinator).status
                not in (actae.RunStatus.RUNNING, actae.RunStatus.WAITING, actae.RunStatus.RETRYING)
            ),
            "the workflow to finish",
        )
        self._say(f"  workflow finished: {self.store.run(coordinator).status.value}")
        self._stop_workers()
        return Report(self, workflow, coordinator).figures()

    def _deliver(self, workflow: str) -> Any:
        """A queue message that starts the workflow; duplicates replay the same start.

        Each delivery is journalled before it is handled: the report's deliveries seen come
        from these records, and what was absorbed from the runs the store actually started.
        """
        self.note("queue.delivered", {"workflow": workflow, "message": f"start:{workflow}"})
        run = self.store.start_run(
            workflow,
            agent_id="drill-coordinator",
            state={"stage": 0, "agents": self.agents, "schema": 1},
            pins=PINS_V1,
            operation_id=f"start:{workflow}",
        )
        return run.run_id

    def note(self, kind: str, payload: dict[str, Any]) -> None:
        """Append a fact to the drill's own durable journal (a channel of the store)."""
        head = self.store.head(self.log.channel_id)
        self.store.record(
            self.log.channel_id, kind=kind, payload=payload, expected_cursor=head.cursor
        )

    def _steps(self, coordinator: Any) -> int:
        channel = self.store.run(coordinator).channel_id
        return sum(e.kind == "coordinator.step" for e in self.store.events(channel))

    def _until(self, condition: Any, what: str) -> None:
        deadline = time.monotonic() + TIMEOUT
        while not condition():
            if time.monotonic() > deadline:
                msg = f"timed out waiting for {what}"
                raise DrillError(msg)
            if self.provider.poll() is not None:
                raise DrillError("the provider process died")
            self._jump_when_idle()
            time.sleep(0.02)  # polling other processes' progress

    def _jump_when_idle(self) -> None:
        """Move virtual time to the next due moment once nothing has moved for a while."""
        position = self.store._service.recorder.max_notification_id() or 0
        if position != self._last_position:
            self._last_position, self._last_change = position, time.monotonic()
            return
        if time.monotonic() - self._last_change < IDLE:
            return
        now = self.store.now()
        due = [(at, why) for at, why in self._due_moments() if at > now]
        if due:
            at, why = min(due)
            seconds = (at - now).total_seconds() + 0.001
            self.clock.advance(seconds)
            self.note(
                "drill.clock_advanced", {"seconds": seconds, "reason": why, "from": now.isoformat()}
            )
            self._last_change = time.monotonic()

    def _due_moments(self) -> list[tuple[datetime, str]]:
        """When something becomes due: timers and waits, retries, and leases running out."""
        projector = self.store.projector()
        projector.catch_up()
        found = [
            (row["wake_at"], "timer")
            for row in projector.query("SELECT wake_at FROM run_status WHERE wake_at IS NOT NULL")
        ]
        found += [
            (row["next_retry_at"], "retry")
            for row in projector.query(
                "SELECT next_retry_at FROM run_status WHERE next_retry_at IS NOT NULL"
            )
        ]
        # Only a dead worker's leases are waited out: jumping past a live worker's lease
        # while it is inside a step would hand its run to another worker mid-step.
        found += [
            (row["expires_at"], "lease")
            for row in projector.query("SELECT worker, expires_at FROM actae_run_leases")
            if row["worker"] in self._dead
        ]
        found += [
            (row["expires_at"], "lease")
            for row in projector.query(
                "SELECT holder, expires_at FROM outstanding_effects WHERE status = 'claimed'"
            )
            if row["holder"] in self._dead
        ]
        return [
            (at if isinstance(at, datetime) else datetime.fromisoformat(at), why)
            for at, why in found
        ]

    def _say(self, text: str) -> None:
        print(text, file=self.out, flush=True)


def drill(
    url: str | None = None,
    *,
    agents: int = 5,
    runs: int = 1,
    seed: int | None = None,
    kill_after: int = 3,
    as_json: bool = False,
    out: TextIO = sys.stdout,
    crash_point: str | None = None,
    duplicate_deliveries: int = 2,
    faults: Collection[str] = (),
) -> int:
    """Run the drill ``runs`` times; print the report; 0 when every invariant held.

    ``crash_point`` makes the first worker kill itself (SIGKILL) at a named point instead of
    being killed after ``kill_after`` transitions: after-model-call, during-commit,
    after-charge-accepted, while-waiting. ``duplicate_deliveries`` repeats the start message
    (half before the kill, the rest after it); ``faults`` (see the module docstring) are for
    tests that prove the report catches a breach.
    """
    if not 1 <= kill_after < STEPS:
        raise actae.ValidationError("kill_after", f"must be between 1 and {STEPS - 1}")
    if crash_point is not None and crash_point not in CRASH_POINTS:
        raise actae.ValidationError("crash_point", f"expected one of {CRASH_POINTS}")
    if agents < 3:
        raise actae.ValidationError("agents", "needs at least 3 (coordinator, payer, sleeper)")
    if duplicate_deliveries < 0:
        raise actae.ValidationError("duplicate_deliveries", "must be 0 or more")
    if unknown := set(faults) - set(FAULTS):
        raise actae.ValidationError("faults", f"unknown {sorted(unknown)}; expected {FAULTS}")
    seed = seed if seed is not None else int.from_bytes(os.urandom(2), "big")
    with tempfile.TemporaryDirectory(prefix="actae-drill-") as folder:
        url = url or f"sqlite:///{Path(folder) / 'drill.db'}"
        progress = sys.stderr if as_json else out
        print(f"Actae failure drill on {url} (seed {seed})", file=progress, flush=True)
        environment = Drill(
            url,
            Path(folder),
            agents=agents,
            seed=seed,
            kill_after=kill_after,
            out=progress,
            crash_point=crash_point,
            duplicate_deliveries=duplicate_deliveries,
            faults=faults,
        )
        try:
            results = [environment.run_once(index) for index in range(runs)]
        finally:
            environment.close()
    summary = summarize(results)
    if as_json:
        print(json.dumps({"runs": results, "summary": summary}, indent=2), file=out)
    else:
        print(table(results, summary), file=out)
    return 0 if summary["all_ok"] else 1
