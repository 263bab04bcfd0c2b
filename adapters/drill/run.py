"""``actae drill``: the failure drill practitioners judge durable execution by (docs/cli.md).

``faults`` break the guarantees on purpose, so tests can prove the report sees a breach.
Every process reads one clock file, which the drill jumps to the next due moment whenever
nothing has moved for ``IDLE`` seconds: a day passes in milliseconds, leases still count.
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
from collections.abc import Callable, Collection, Iterable
from dataclasses import KW_ONLY, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from actae.adapters.drill.db_faults import FAULTS as DB_FAULTS
from actae.adapters.drill.db_faults import DatabaseServer
from actae.adapters.drill.outages import JOURNAL_KIND, plan
from actae.adapters.drill.report import Report, summarize, table
from actae.adapters.drill.workflows import CRASH_POINTS, PINS_V1
from actae.adapters.logs import Lines, TextFormatter
from actae.adapters.persistence.clock import OffsetClock
from actae.adapters.persistence.outages import Outage, is_transient, ride_out
from actae.adapters.runtime.store import open as open_store
from actae.domain.errors import ActaeError, ValidationError
from actae.domain.values import RunStatus

FAULTS = ("payer-retries-in-doubt", "provider-ignores-idempotency-keys")

STEPS = 7
TIMEOUT = 180.0
IDLE = 0.3  # seconds without a new event after which the drill jumps the clock
LEASE = 10.0  # seconds a worker's run lease lasts without a heartbeat
DUE = (
    ("timer", "SELECT wake_at AS at FROM run_status WHERE wake_at IS NOT NULL"),
    ("retry", "SELECT next_retry_at AS at FROM run_status WHERE next_retry_at IS NOT NULL"),
    ("lease", "SELECT expires_at AS at, worker AS who FROM actae_run_leases"),
    (
        "lease",
        "SELECT expires_at AS at, holder AS who FROM outstanding_effects WHERE status = 'claimed'",
    ),
)
"""What becomes due, and why. Only a dead worker's leases are waited out: jumping past a live
worker's lease inside a step would hand its run to another worker mid-step."""

log = logging.getLogger("actae.drill")


class DrillError(ActaeError):
    """The drill could not run to its end (a process died, or it timed out)."""

    code = "drill"


@dataclass(eq=False)
class Drill:
    """One drill environment: store, clock, provider and worker processes."""

    url: str
    folder: Path
    _: KW_ONLY
    agents: int
    seed: int
    kill_after: int
    out: TextIO  # progress lines, besides the actae.drill logger
    crash_point: str | None = None
    duplicate_deliveries: int = 2
    faults: Collection[str] = ()
    server: DatabaseServer | None = None
    db_fault: str = "restart"

    def __post_init__(self) -> None:
        self._say = Lines(log, self.out, formatter=TextFormatter()).say
        self._say(f"Actae failure drill on {self.url} (seed {self.seed})")
        self.clock = OffsetClock(str(self.folder / "clock"))
        self.store = open_store(self.url, clock=self.clock)
        self.log = self.store.start_run(
            f"drill-log-{uuid.uuid4().hex[:8]}", agent_id="driver", state={}
        )
        self.provider, self.provider_url = self._start_provider()
        self.workers: dict[str, subprocess.Popen[str]] = {}
        self._last_position, self._last_change = -1, time.monotonic()
        self._dead: set[str] = set()  # workers the drill killed: only their leases are waited out
        self._may_die: set[str] = set()  # workers told to kill themselves (--crash-point)
        self._exited: set[str] = set()  # workers that exited unplanned, journalled once

    def run_once(self, index: int) -> dict[str, Any]:
        """Run the scenario once and report on it from durable history."""
        workflow = f"drill-{self.seed}-{index}"
        coordinator = self._deliver(workflow)
        early = (self.duplicate_deliveries + 1) // 2  # the rest arrive after the crash
        for _ in range(early):
            self._deliver(workflow)
        outages = plan(self.seed, index) if self.server is not None else ()
        w1 = f"{workflow}-w1"
        if self.crash_point:
            self._may_die.add(w1)
        first = self._start_worker(w1, schema=1, crash=self.crash_point or "")
        about = {"workflow": workflow, "run_id": coordinator, "worker": w1}
        self._say(
            f"run {index + 1}: {self.agents}-agent workflow {workflow} started on w1", **about
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
        self._dead.add(w1)
        after = self._steps(coordinator)
        self.note(
            "drill.killed",
            {"workflow": workflow, "worker": w1, "after_transitions": after, "where": where},
        )
        self._say(f"  killed w1 (SIGKILL) {where}; rolling out schema 2 on w2 and w3", **about)
        for _ in range(self.duplicate_deliveries - early):
            self._deliver(workflow)
        takeover = [f"{workflow}-w2", f"{workflow}-w3"]
        for name in takeover:
            self._start_worker(name, schema=2)
        if "after-kill" in outages:
            # Once they work: a worker still opening its store would fail to start, which
            # is not what this moment is about (a supervisor restarts such a worker).
            self._until(
                lambda: all(self._working(name) for name in takeover),
                "the takeover workers to start",
            )
            self._outage(workflow, "after-kill")
        if "during-takeover" in outages:
            self._until(
                lambda: self._steps(coordinator) > after or self._finished(coordinator),
                "a takeover worker to commit a transition",
            )
            # The takeover may finish in one pass (its children were done before the kill):
            # then the outage hits idle workers, which must outlive it all the same.
            self._outage(workflow, "during-takeover")
        self._until(lambda: self._finished(coordinator), "the workflow to finish")
        status = self.store.run(coordinator).status.value
        self._say(f"  workflow finished: {status}", workflow=workflow, run_id=coordinator)
        self._notice_exits()
        _stop(self.workers.values())
        self.workers.clear()
        return Report(self, workflow, coordinator).figures()

    def _deliver(self, workflow: str) -> Any:
        """A queue message that starts the workflow (journalled first); duplicates replay it."""
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
        """Append a fact to the drill's own journal, once even if a reply is lost."""
        operation = f"drill-note:{uuid.uuid4()}"

        def record() -> None:
            head = self.store.head(self.log.channel_id)
            self.store.record(
                self.log.channel_id,
                kind=kind,
                payload=payload,
                expected_cursor=head.cursor,
                operation_id=operation,
            )

        # An outage is waited out; one that outlasts the drill raises its error.
        ride_out(record, Outage("the drill's journal", log.debug), within=TIMEOUT)

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
        status = self.store.run(coordinator).status
        return status not in (RunStatus.RUNNING, RunStatus.WAITING, RunStatus.RETRYING)

    def _steps(self, coordinator: Any) -> int:
        channel = self.store.run(coordinator).channel_id
        return sum(e.kind == "coordinator.step" for e in self.store.events(channel))

    def _until(self, condition: Callable[[], object], what: str) -> None:
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
            exited = self.workers and all(p.poll() is not None for p in self.workers.values())
            if exited and not self._transiently(condition):  # it may be their exit
                msg = f"every worker process has exited while waiting for {what}"
                raise DrillError(msg)
            time.sleep(0.02)  # polling other processes' progress

    def _notice_exits(self) -> None:
        """Journal each worker that exited without the drill killing it (it fails the drill)."""
        for name, process in self.workers.items():
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
    def _transiently(call: Callable[[], object]) -> bool:
        """``call()``'s truth, or False when the database is out for now (it comes back)."""
        try:
            return bool(call())
        except Exception as error:
            if is_transient(error):
                return False
            raise

    def _jump_when_idle(self) -> None:
        """Move virtual time to the next due moment once nothing has moved for ``IDLE`` s."""
        position = self.store.position()
        if position != self._last_position:
            self._last_position, self._last_change = position, time.monotonic()
            return
        if time.monotonic() - self._last_change < IDLE:
            return
        now = self.store.now()
        projector = self.store.projector()
        projector.catch_up()
        due = []
        for why, query in DUE:
            for row in projector.db.query(query):
                at = row["at"]
                at = at if isinstance(at, datetime) else datetime.fromisoformat(at)
                if at > now and (why != "lease" or row["who"] in self._dead):
                    due.append((at, why))
        if due:
            at, why = min(due)
            seconds = (at - now).total_seconds() + 0.001
            self.clock.advance(seconds)
            self.note(
                "drill.clock_advanced", {"seconds": seconds, "reason": why, "from": now.isoformat()}
            )
            self._last_change = time.monotonic()

    def _start_provider(self) -> tuple[subprocess.Popen[str], str]:
        ignore_keys = "provider-ignores-idempotency-keys" in self.faults
        ledger = str(self.folder / "provider.db")
        flags = ["--ignore-idempotency-keys"] if ignore_keys else []
        command = [sys.executable, "-m", "actae.adapters.drill.provider", ledger, *flags]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)  # noqa: S603
        assert process.stdout is not None  # noqa: S101
        port = process.stdout.readline().split()[1]
        return process, f"http://127.0.0.1:{port}"

    def _start_worker(self, name: str, schema: int, crash: str = "") -> subprocess.Popen[str]:
        """A real ``actae worker`` process with the drill's workflows, its stderr in a log."""
        env = {
            "ACTAE_DRILL_CRASH": crash,
            "ACTAE_DRILL_CRASH_MARKER": str(self.folder / f"{name}.crashed"),
            **os.environ,
            "ACTAE_DRILL_PROVIDER": self.provider_url,
            "ACTAE_DRILL_SCHEMA": str(schema),
            "ACTAE_DRILL_FAULTS": ",".join(self.faults),
            "ACTAE_DB": self.url,  # not on the command line, where ps shows a password
        }
        # --wait-for-db: a worker may start while the drill's database fault is on
        options = f"--wait-for-db 60 --name {name} --lease {LEASE} --poll-interval 0.05".split()
        clock = ["--clock-file", str(self.folder / "clock")]
        process = subprocess.Popen(  # noqa: S603 - our own CLI
            [sys.executable, "-m", "actae.adapters.cli.drill_worker", *options, *clock],
            env=env,
            stderr=(self.folder / f"{name}.log").open("w"),
            text=True,
        )
        self.workers[name] = process
        return process

    def _working(self, name: str) -> bool:
        """Whether worker ``name`` opened its store and works (it says so on stderr)."""
        return "working on" in (self.folder / f"{name}.log").read_text(errors="replace")

    def close(self) -> None:
        """Stop every process and the store."""
        _stop([*self.workers.values(), self.provider])
        self.store.close()


def _stop(processes: Iterable[subprocess.Popen[str]]) -> None:
    """SIGTERM to each process still running; SIGKILL to one still there 10 s later."""
    processes = list(processes)
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()


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
    """Run the drill ``runs`` times; print the report; 0 when every invariant held."""
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
        environment = Drill(
            url,
            Path(folder),
            agents=agents,
            seed=seed,
            kill_after=kill_after,
            out=sys.stderr if as_json else out,
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
