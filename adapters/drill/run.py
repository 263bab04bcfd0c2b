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

With ``db_fault`` (``actae drill --db postgresql://... --db-fault restart``) the PostgreSQL
server also goes down once or twice per run among the kills (``drill_outages``); the drill
waits its own queries through each outage and journals it for the report.

Virtual time: every process reads one shared clock file. When nothing can progress (all runs
wait for a timer, a retry, or a dead worker's lease), the drill jumps the clock to the next
due moment, so a day passes in milliseconds and leases still mean something.

Progress lines go to the ``actae.drill`` logger and to ``out`` (stderr with ``--json``), each
with its time, level and, where it has them, the workflow, run and worker; the report is
the drill's output, on ``out``.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Collection
from pathlib import Path
from typing import Any, TextIO

from actae.adapters.drill.db_faults import FAULTS as DB_FAULTS
from actae.adapters.drill.db_faults import DatabaseServer
from actae.adapters.drill.outages import JOURNAL_KIND, plan
from actae.adapters.drill.processes import DrillProcesses
from actae.adapters.drill.report import Report, summarize, table
from actae.adapters.drill.timing import VirtualTime
from actae.adapters.logs import Lines, TextFormatter
from actae.adapters.persistence.clock import OffsetClock
from actae.adapters.persistence.outages import is_transient
from actae.adapters.runtime.store import open as open_store
from actae.domain.errors import ActaeError, ValidationError
from actae.domain.values import RunStatus

CRASH_POINTS = ("after-model-call", "during-commit", "after-charge-accepted", "while-waiting")
FAULTS = ("payer-retries-in-doubt", "provider-ignores-idempotency-keys")

STEPS = 7
TIMEOUT = 180.0
PINS_V1 = {"model": "mock-llm-1", "prompt": "drill-p1", "tools": "drill-t1", "schema": 1}

log = logging.getLogger("actae.drill")


class DrillError(ActaeError):
    """The drill could not run to its end (a process died, or it timed out)."""

    code = "drill"


class Drill(DrillProcesses, VirtualTime):
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
        server: DatabaseServer | None = None,
        db_fault: str = "restart",
    ) -> None:
        self.url, self.folder, self.agents = url, folder, agents
        self.server, self.db_fault = server, db_fault
        self.seed, self.kill_after, self.out = seed, kill_after, out
        self._lines = Lines(log, out, formatter=TextFormatter())
        self.crash_point, self.duplicate_deliveries = crash_point, duplicate_deliveries
        self.faults = tuple(faults)
        self.clock = OffsetClock(str(folder / "clock"))
        self.store = open_store(url, clock=self.clock)
        self.log = self.store.start_run(
            f"drill-log-{uuid.uuid4().hex[:8]}", agent_id="driver", state={}
        )
        self.provider, self.provider_url = self._start_provider()
        self.workers: list[subprocess.Popen[str]] = []
        self.worker_names: dict[int, str] = {}
        self._last_position, self._last_change = -1, time.monotonic()
        self._dead: set[str] = set()  # workers the drill killed: only their leases are waited out
        self._may_die: set[str] = set()  # workers told to kill themselves (--crash-point)
        self._exited: set[str] = set()  # workers that exited unplanned, journalled once

    # -- one drill run --------------------------------------------------------------------

    def run_once(self, index: int) -> dict[str, Any]:
        """Run the scenario once and report on it from durable history."""
        workflow = f"drill-{self.seed}-{index}"
        coordinator = self._deliver(workflow)
        early = (self.duplicate_deliveries + 1) // 2  # the rest arrive after the crash
        for _ in range(early):
            self._deliver(workflow)
        outages = plan(self.seed, index) if self.server is not None else ()
        if self.crash_point:
            self._may_die.add(f"{workflow}-w1")
        first = self._start_worker(f"{workflow}-w1", schema=1, crash=self.crash_point or "")
        self._say(
            f"run {index + 1}: {self.agents}-agent workflow {workflow} started on w1",
            workflow=workflow,
            run_id=coordinator,
            worker=f"{workflow}-w1",
        )
        if "before-kill" in outages:
            self._until(
                lambda: self._steps(coordinator) >= self.kill_after - 1 or first.poll() is not None,
                "w1 to be mid-workflow",
            )
            self._outage(workflow, "before-kill")
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
        self._say(
            f"  killed w1 (SIGKILL) {where}; rolling out schema 2 on w2 and w3",
            workflow=workflow,
            run_id=coordinator,
            worker=f"{workflow}-w1",
        )
        for _ in range(self.duplicate_deliveries - early):
            self._deliver(workflow)
        for name in ("w2", "w3"):
            self._start_worker(f"{workflow}-{name}", schema=2)
        if "after-kill" in outages:
            # Once they work: a worker still opening its store would fail to start, which
            # is not what this moment is about (a supervisor restarts such a worker).
            self._until(
                lambda: all(self._working(f"{workflow}-{name}") for name in ("w2", "w3")),
                "the takeover workers to start",
            )
            self._outage(workflow, "after-kill")
        if "during-takeover" in outages:
            killed_at = self._steps(coordinator)
            self._until(
                lambda: self._steps(coordinator) > killed_at or self._finished(coordinator),
                "a takeover worker to commit a transition",
            )
            # The takeover may finish in one pass (its children were done before the kill):
            # then the outage hits idle workers, which must outlive it all the same.
            self._outage(workflow, "during-takeover")
        self._until(lambda: self._finished(coordinator), "the workflow to finish")
        self._say(
            f"  workflow finished: {self.store.run(coordinator).status.value}",
            workflow=workflow,
            run_id=coordinator,
        )
        self._notice_exits()
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
        """Append a fact to the drill's own durable journal (a channel of the store).

        Under one operation id, so a retry after a lost reply records it once.
        """
        operation = f"drill-note:{uuid.uuid4()}"

        deadline = time.monotonic() + TIMEOUT
        while True:
            try:
                head = self.store.head(self.log.channel_id)
                self.store.record(
                    self.log.channel_id,
                    kind=kind,
                    payload=payload,
                    expected_cursor=head.cursor,
                    operation_id=operation,
                )
                return
            except Exception as error:
                if not is_transient(error) or time.monotonic() > deadline:
                    raise
            time.sleep(0.05)  # the database is coming back

    def _outage(self, workflow: str, moment: str) -> None:
        """Take the database server down (``db_fault``) and journal the outage once it is back."""
        assert self.server is not None  # noqa: S101 - only planned with a server
        outage = self.server.inject(self.db_fault, clock=self.clock)
        self.note(JOURNAL_KIND, {"workflow": workflow, "moment": moment, **outage.as_dict()})
        self._say(
            f"  database {self.db_fault} {moment}: no connections for {outage.seconds} s",
            workflow=workflow,
        )

    def _finished(self, coordinator: Any) -> bool:
        return self.store.run(coordinator).status not in (
            RunStatus.RUNNING,
            RunStatus.WAITING,
            RunStatus.RETRYING,
        )

    def _steps(self, coordinator: Any) -> int:
        channel = self.store.run(coordinator).channel_id
        return sum(e.kind == "coordinator.step" for e in self.store.events(channel))

    def _until(self, condition: Any, what: str) -> None:
        """Poll until ``condition()``; a database outage on the way is waited out."""
        deadline = time.monotonic() + TIMEOUT
        while not self._transiently(condition):
            if time.monotonic() > deadline:
                msg = f"timed out waiting for {what}"
                raise DrillError(msg)
            if self.provider.poll() is not None:
                raise DrillError("the provider process died")
            self._transiently(self._jump_when_idle)
            self._notice_exits()
            exited = self.workers and all(p.poll() is not None for p in self.workers)
            if exited and not self._transiently(condition):  # it may be their exit
                msg = f"every worker process has exited while waiting for {what}"
                raise DrillError(msg)
            time.sleep(0.02)  # polling other processes' progress

    def _notice_exits(self) -> None:
        """Journal each worker that exited without the drill killing it (there must be none).

        A worker that dies of a database outage, say, is an invariant failure even when the
        other workers finish its runs.
        """
        for process in self.workers:
            name = self.worker_names[process.pid]
            if process.poll() is None or name in self._dead | self._may_die | self._exited:
                continue
            self._exited.add(name)
            workflow = name.rsplit("-", 1)[0]
            self.note(
                "drill.worker_exited",
                {"workflow": workflow, "worker": name, "status": process.returncode},
            )
            self._say(
                f"  {name} exited unplanned (status {process.returncode})",
                level=logging.WARNING,
                workflow=workflow,
                worker=name,
            )

    @staticmethod
    def _transiently(call: Any) -> bool:
        """``call()``'s truth, or False when the database is out for now (it comes back)."""
        try:
            return bool(call())
        except Exception as error:
            if is_transient(error):
                return False
            raise

    def _say(self, text: str, *, level: int = logging.INFO, **fields: object) -> None:
        """A progress line, to the ``actae.drill`` logger and to ``out``."""
        self._lines.say(text, level=level, **fields)


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
    db_fault: str | None = None,
) -> int:
    """Run the drill ``runs`` times; print the report; 0 when every invariant held.

    ``crash_point`` makes the first worker kill itself (SIGKILL) at a named point instead of
    being killed after ``kill_after`` transitions: after-model-call, during-commit,
    after-charge-accepted, while-waiting. ``duplicate_deliveries`` repeats the start message
    (half before the kill, the rest after it); ``faults`` (see the module docstring) are for
    tests that prove the report catches a breach. ``db_fault`` (restart, crash or
    terminate; a PostgreSQL ``url`` on this machine) takes the database server down once or
    twice per run among the kills (see ``drill_outages``).
    """
    if not 1 <= kill_after < STEPS:
        raise ValidationError("kill_after", f"must be between 1 and {STEPS - 1}")
    if crash_point is not None and crash_point not in CRASH_POINTS:
        raise ValidationError("crash_point", f"expected one of {CRASH_POINTS}")
    if agents < 3:
        raise ValidationError("agents", "needs at least 3 (coordinator, payer, sleeper)")
    if duplicate_deliveries < 0:
        raise ValidationError("duplicate_deliveries", "must be 0 or more")
    if unknown := set(faults) - set(FAULTS):
        raise ValidationError("faults", f"unknown {sorted(unknown)}; expected {FAULTS}")
    server = None
    if db_fault is not None:
        if db_fault not in DB_FAULTS:
            raise ValidationError("db_fault", f"expected one of {DB_FAULTS}")
        if url is None:
            raise ValidationError(
                "db_fault", "needs --db postgresql://... (the default SQLite store has no server)"
            )
        server = DatabaseServer(url)  # refuses a URL whose server cannot be controlled here
    seed = seed if seed is not None else int.from_bytes(os.urandom(2), "big")
    with tempfile.TemporaryDirectory(prefix="actae-drill-") as folder:
        url = url or f"sqlite:///{Path(folder) / 'drill.db'}"
        progress = sys.stderr if as_json else out
        Lines(log, progress, formatter=TextFormatter()).say(
            f"Actae failure drill on {url} (seed {seed})"
        )
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
            server=server,
            db_fault=db_fault or "restart",
        )
        try:
            results = [environment.run_once(index) for index in range(runs)]
        finally:
            environment.close()
    summary = summarize(results)  # the report is the drill's output, not a log line
    if as_json:
        print(json.dumps({"runs": results, "summary": summary}, indent=2), file=out)
    else:
        print(table(results, summary), file=out)
    return 0 if summary["all_ok"] else 1
