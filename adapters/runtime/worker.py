"""Workflows and the worker runtime that runs them, taking over from workers that died.

``@actae.workflow("agent-name")`` registers the code for runs of that ``agent_id``; a
``Worker`` runs each runnable run from the top under a lease, so recorded steps replay and
a dead worker's run is finished by another (docs/workflows.md, "Workers"). It never spins
and never stays silent: a run that cannot advance cools down until the reason ends or its
channel moves, and the agents it serves are advertised so run_status names a run no live
worker serves. Logs: ``actae.worker`` (docs/logging.md); spans: docs/telemetry.md.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
import logging
import operator
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TextIO, cast

from actae.adapters.logs import Lines
from actae.adapters.persistence.clock import skew_warning
from actae.adapters.persistence.outages import Outage, is_transient, ride_out, store_outage
from actae.adapters.redaction.redactors import redactor_of
from actae.adapters.runtime.async_context import AsyncRunContext
from actae.adapters.runtime.outcomes import (
    COOLDOWN,
    Cooldown,
    cooldown_for,
    describe_stop,
    explained,
    printable,
    run_result,
    worth_a_turn_at,
)
from actae.adapters.runtime.run_lease import RunLease, RunLeases
from actae.adapters.runtime.store import RunContext
from actae.adapters.telemetry.runs import taking
from actae.adapters.telemetry.tracing import failed_here
from actae.domain.disclosure import error_text
from actae.domain.errors import (
    ActaeError,
    HistoryRegressedError,
    IllegalTransitionError,
    ValidationError,
)
from actae.domain.redaction import Redactor
from actae.domain.validation import require_text

if TYPE_CHECKING:
    from actae.adapters.runtime.store import Store
    from actae.domain.lifecycle import Migration

WorkflowCode = Callable[[RunContext], object] | Callable[[AsyncRunContext], Awaitable[object]]
"""Returns the run's result (a mapping, None, any JSON value); ``async def`` code is awaited."""

RunCoroutine = Callable[[Coroutine[Any, Any, object]], object]
RunBlocking = Callable[[Callable[[], object]], object]

CommitHook = Callable[[Sequence[object]], None]
"""Called with the events of a write right after it commits, before the write returns."""

log = logging.getLogger("actae.worker")


@dataclass(frozen=True)
class Workflow:
    """Workflow code for one agent name, with the pins and migrations it runs under."""

    name: str
    code: WorkflowCode
    pins: Mapping[str, Any] | None = None
    migrations: Mapping[int, Migration] = field(default_factory=dict)
    redact: Redactor | None = None
    """Removes secrets from what its steps, records and effects return (docs/data.md)."""


class Registry:
    """Workflow code by agent name."""

    def __init__(self) -> None:
        self._workflows: dict[str, Workflow] = {}

    def workflow(
        self,
        name: str,
        *,
        pins: Mapping[str, Any] | None = None,
        migrations: Mapping[int, Migration] | None = None,
        redact: Redactor | bool | None = None,
    ) -> Callable[[WorkflowCode], WorkflowCode]:
        """Decorator: run ``code(ctx)`` for runs whose ``agent_id`` is ``name``.

        ``redact``: ``True`` (the built-in secret patterns) or a redactor, run on what the
        workflow's steps, records and effects return before it is written (and the store's).
        """
        name = require_text("name", name)  # advertised in the read models
        redactor = redactor_of(redact)

        def register(code: WorkflowCode) -> WorkflowCode:
            self._workflows[name] = Workflow(name, code, pins, dict(migrations or {}), redactor)
            return code

        return register

    def get(self, name: str) -> Workflow | None:
        """The workflow registered for ``name``."""
        return self._workflows.get(name)

    def names(self) -> list[str]:
        """The agent names that have a workflow here."""
        return sorted(self._workflows)


REGISTRY = Registry()
RETENTION_EVERY = 600.0
"""Seconds between a worker's retention passes, by default (few policies run out faster)."""
workflow = REGISTRY.workflow
CANDIDATES = (
    "SELECT run_id, agent_id, lifecycle, status, unserved, wake_at, next_retry_at, head_cursor "
    "FROM run_status WHERE lifecycle IN ('running', 'waiting') ORDER BY created_at"
)
"""The runs a pass may serve; ``head_cursor`` ends a cooldown that an event made stale."""


class Worker:
    """Runs registered workflows: picks up runnable runs, due timers and expired waits.

    ``out`` also gets its log lines, as ``[name] what happened``. ``on_commit``, a seam for
    fault injection, is called with the events of every write that commits through
    ``store``, after the commit and before the write returns (the drill's ``during-commit``
    crash point: committed, and no one in the process learns it). ``run_coroutine`` runs an
    ``async def`` workflow (``asyncio.run``), ``run_blocking`` a plain one (in this thread);
    an ``AsyncWorker`` passes its own.
    """

    def __init__(
        self,
        store: Store,
        *,
        name: str,
        registry: Registry = REGISTRY,
        lease: float = 30.0,
        poll_interval: float = 0.2,
        out: TextIO | None = None,
        on_commit: CommitHook | None = None,
        run_coroutine: RunCoroutine = asyncio.run,
        run_blocking: RunBlocking = operator.call,
        retention_every: float | None = RETENTION_EVERY,
    ) -> None:
        self.store = store
        self.retention_every = retention_every
        """Seconds between this worker's retention passes (``None``: it applies none)."""
        self._retention_due = 0.0  # monotonic
        self.run_coroutine = run_coroutine
        self.run_blocking = run_blocking
        self.name = require_text("name", name)  # stored in the read models
        self.registry = registry
        self.lease = lease
        self.poll_interval = poll_interval
        self._lines = Lines(
            log, out, formatter=logging.Formatter("[%(worker)s] %(message)s"), worker=self.name
        )
        if on_commit is not None:
            store.on_commit(on_commit)
        self._stop = threading.Event()
        self.outcomes: list[tuple[Any, str]] = []
        self._cooldowns: dict[str, Cooldown] = {}
        self._advertised_until: datetime | None = None
        self._last_said: dict[str, str] = {}  # run -> what was last logged about it
        self._unreleased: dict[str, tuple[Any, int]] = {}  # run -> lease token still held
        self.outage = Outage(f"worker {name}", self._warn)
        if (skewed := skew_warning(store.clock_skew())) is not None:
            self._warn(skewed)  # leases are safe on the database's clock; the host's logs are not

    def request_stop(self) -> None:
        """Stop after the current run (signal-safe)."""
        self._stop.set()

    def run(self) -> None:
        """Work until ``request_stop()``; sleeps between passes that advanced nothing.

        An outage is ridden out (logged once); any other error, ``HistoryRegressedError``
        included (after the runs' rows say so), ends the loop.
        """
        try:
            while not self._stop.is_set():
                try:
                    advanced = ride_out(
                        self.run_once,
                        self.outage,
                        give_up=self._stop.is_set,
                        sleep=self._stop.wait,
                    )
                except Exception as error:
                    if self._stop.is_set() and is_transient(error):
                        break
                    raise
                if advanced == 0:
                    self._stop.wait(self.poll_interval)
        finally:
            self.withdraw()

    def withdraw(self) -> None:
        """Stop advertising this worker's agents (unreachable: the advertisement expires)."""
        try:
            self._leases().advertise(self.name, [], self.store.now())
        except Exception as error:
            if not is_transient(error):
                raise
        self._advertised_until = None

    def run_once(self) -> int:
        """One pass: wake due waits, run every runnable run it can take; how many advanced.

        A run that could not advance does not count and cools down, so ``run()`` sleeps
        instead of spinning.
        """
        rows, now = self.begin_pass()
        advanced = 0
        for row in rows:
            if self._stop.is_set():
                break
            advanced += self._isolated(row, now)
        self.end_pass()
        return advanced

    def begin_pass(self) -> tuple[list[Mapping[str, Any]], datetime]:
        """Catch the read models up, tidy advertisement and leases; the candidates, and now."""
        projector = self.store.projector()
        projector.catch_up(give_up=self._stop.is_set)
        now = self.store.now()
        self._release_pending()
        self._advertise(now)
        projector.mark_unserved(now)
        return list(projector.db.query(CANDIDATES)), now

    def end_pass(self) -> None:
        """Catch the read models up (``actae worker --once`` shows the pass); apply retention."""
        self.store.projector().catch_up(give_up=self._stop.is_set)
        if self.retention_every is not None and time.monotonic() >= self._retention_due:
            self._retention_due = time.monotonic() + self.retention_every
            report = self.store.apply_retention(actor=f"worker {self.name}")
            if report.purged:
                self._lines.say(f"retention purged {len(report.purged)} finished runs")

    def _isolated(self, row: Mapping[str, Any], now: datetime) -> int:
        """Serve one run; what goes wrong with it stays with it, cooling it down (poison)."""
        try:
            return self._serve(row, now)
        except HistoryRegressedError as regressed:  # the store, not the run: stop working
            self._stop_for(regressed)
            raise
        except Exception as error:  # one run must never stop the worker
            if is_transient(error):
                raise  # the database, not the run: the whole pass waits for it
            run_id = str(row["run_id"])
            self._cooldowns[run_id] = replace(
                Cooldown.short(now, COOLDOWN), cursor=row.get("head_cursor")
            )
            said = self._error_text(error, run_id) if self.store.encrypting else repr(error)
            self._warn(f"run {run_id}: not advanced: {printable(said)}", run_id=run_id)
            return 0

    def _serve(self, row: Mapping[str, Any], now: datetime) -> int:
        """Wake the run if due, then run it if it is runnable here; how many moves it made."""
        woke = 0
        if row["lifecycle"] == "waiting":
            if not (worth_a_turn_at(row, now) and self.store.wake_due(row["run_id"])):
                return 0
            woke, row = 1, {**row, "lifecycle": "running", "status": "running"}
        code = self.registry.get(row["agent_id"])
        if code is None:
            if row["unserved"]:
                agent = row["agent_id"]
                self._say_once(
                    row["run_id"],
                    f"no live worker has a workflow for agent {agent!r}; register it "
                    f"(@actae.workflow({agent!r})) in a worker",
                    level=logging.WARNING,
                )
            return woke
        if self._runnable(row, now) and self._take(row, code):
            return woke + 1
        return woke

    def worth_serving(self, row: Mapping[str, Any], now: datetime) -> bool:
        """Whether serving ``row`` could move it now (no IO): a concurrent worker's slots' test."""
        if row["lifecycle"] == "waiting":
            return worth_a_turn_at(row, now)
        return self.registry.get(row["agent_id"]) is not None and self._runnable(row, now)

    def _runnable(self, row: Mapping[str, Any], now: datetime) -> bool:
        """Whether the run's standing lets a turn move it now, and no cooldown here holds it."""
        if not worth_a_turn_at(row, now):
            return False
        cooldown = self._cooldowns.get(str(row["run_id"]))
        if cooldown is not None:
            if not cooldown.over(now, row.get("head_cursor")):
                return False
            del self._cooldowns[str(row["run_id"])]
        return True

    def _advertise(self, now: datetime) -> None:
        """Renew this worker's advertisement of its agents once a third of the lease is gone."""
        fresh = self._advertised_until
        if fresh is not None and now < fresh - timedelta(seconds=self.lease * 2 / 3):
            return
        until = now + timedelta(seconds=self.lease)
        self._leases().advertise(self.name, self.registry.names(), until)
        self._advertised_until = until

    def _take(self, row: Mapping[str, Any], code: Workflow) -> bool:
        """Run the workflow under the run's lease; whether the run advanced."""
        run_id = row["run_id"]
        leases = self._leases()
        sent = time.monotonic()  # first: the lease is never thought valid beyond its expiry
        now = self.store.now()
        token = leases.acquire(run_id, self.name, now, now + timedelta(seconds=self.lease))
        if token is None:
            return False
        lease = RunLease(
            leases,
            run_id,
            worker=self.name,
            token=token,
            seconds=self.lease,
            valid_from=sent,
            now=self.store.now,
            outage=self.outage,
            on_beat=lambda: self._advertise(self.store.now()),  # its agent stays served
        ).start()
        try:
            outcome, cooldown = self._execute(run_id, code, lease, row.get("head_cursor"))
        finally:
            lease.stop()
            self._release(run_id, token)
        self.outcomes.append((run_id, outcome))
        if cooldown is not None:
            self._cooldowns[str(run_id)] = cooldown
        failed = outcome.startswith("failed")
        self._say_once(run_id, outcome, level=logging.WARNING if failed else logging.INFO)
        return cooldown is None

    def _leases(self) -> RunLeases:
        """The run leases and advertisements, written as the store's read models are."""
        return RunLeases(self.store.projector().db)

    def _release(self, run_id: Any, token: int) -> None:
        """Let the run go; unreachable, again each pass (else it is held for the lease's term)."""
        self._unreleased[str(run_id)] = (run_id, token)
        try:
            self._leases().release(run_id, token, self.store.now())
        except Exception as error:
            if not is_transient(error):
                raise
            return
        self._unreleased.pop(str(run_id), None)  # a concurrent pass may have released it

    def _release_pending(self) -> None:
        for run_id, token in list(self._unreleased.values()):
            self._release(run_id, token)

    def _execute(
        self, run_id: Any, code: Workflow, lease: RunLease, seen: int | None
    ) -> tuple[str, Cooldown | None]:
        """Resume the run and run its workflow in the run's trace; the outcome and cooldown.

        ``seen``: the run's head as the pass found it, the cooldown's cursor if not resumed.
        """
        try:  # a resume refused (say, this worker's pins are invalid) is not the run's fault
            ctx = self.store.resume(
                run_id,
                worker=self.name,
                pins=code.pins,
                migrations=code.migrations,
                redact=code.redact,
            )
        except HistoryRegressedError:
            raise
        except ActaeError as stop:
            said = self._describe_stop(stop, run_id)
            return said, cooldown_for(stop, self.store.now(), cursor=seen)
        ctx.lease, ctx.outage = lease, self._outage_of(run_id)
        with taking(ctx.run, worker=self.name, sealed=self.store.encrypting) as turn:
            outcome, cooldown = self._finish(run_id, code, ctx, lease)
            turn.ended(outcome)
        return outcome, cooldown

    def _finish(
        self, run_id: Any, code: Workflow, ctx: RunContext, lease: RunLease
    ) -> tuple[str, Cooldown | None]:
        """Run the workflow from the top and complete the run; what happened, and the cooldown."""
        try:
            result = self._run_code(code, ctx)
            lease.ensure_held()
            self._complete(ctx, run_result(result))
        except ValidationError as invalid:  # the same code fails the same way: final
            return self._fail(run_id, invalid), None
        except HistoryRegressedError:
            raise
        except ActaeError as stop:  # cooled down until an event the context had not seen
            cursor = ctx.head.cursor
            said = self._describe_stop(stop, run_id)
            return said, cooldown_for(stop, self.store.now(), cursor=cursor)
        except concurrent.futures.CancelledError:  # an async workflow's task was cancelled
            return "stopped: cancelled (left as a killed worker leaves it)", None
        except Exception as error:
            if store_outage(error):
                raise  # the store's database, not the run: the pass is tried again later
            return self._fail(run_id, error), None  # the workflow's own bug fails its run
        return "completed", None

    def _complete(self, ctx: RunContext, result: dict[str, Any]) -> None:
        """Complete the run; one paused or cancelled meanwhile stops at that boundary instead."""
        try:
            self.store.complete_run(ctx.run_id, result)
        except IllegalTransitionError:
            ctx.checkpoint()  # raises RunStoppedError for a run that may not go on
            raise

    def _run_code(self, code: Workflow, ctx: RunContext) -> object:
        """The workflow's result: called with ``ctx``, or awaited with its async face."""
        if inspect.iscoroutinefunction(code.code):
            workflow = cast(Callable[[AsyncRunContext], Coroutine[Any, Any, object]], code.code)
            return self.run_coroutine(workflow(AsyncRunContext(ctx)))
        plain = cast(Callable[[RunContext], object], code.code)
        return self.run_blocking(functools.partial(plain, ctx))

    def _fail(self, run_id: Any, error: Exception) -> str:
        """Fail the run with ``error`` unless ``ctx.step`` did; the outcome, as allowed.

        The run records the whole message; log and span get only its type when sealed.
        """
        message = printable(f"{type(error).__name__}: {error}")
        try:
            cursor = self.store.fail_run(run_id, message, actor=self.name).cursor
        except IllegalTransitionError:  # failed already: its failure is the run's last record
            cursor = self.store.run(run_id).cursor
        failed_here(error, sealed=self.store.encrypting, run_id=run_id, cursor=cursor)
        return f"failed: {printable(self._error_text(error, run_id, cursor))}"

    def _error_text(self, error: BaseException, run_id: Any, cursor: int | None = None) -> str:
        """What this worker may say of ``error`` (its type alone when the store encrypts)."""
        return error_text(error, sealed=self.store.encrypting, run_id=run_id, cursor=cursor)

    def _describe_stop(self, stop: ActaeError, run_id: Any) -> str:
        """Why the run did not finish in this pass; an unexplained stop by its type when sealed."""
        if self.store.encrypting and not explained(stop):
            return f"not advanced: {self._error_text(stop, run_id)}"
        return describe_stop(stop)

    def _stop_for(self, regressed: HistoryRegressedError) -> None:
        """Take no more work: the store lost history this process saw (docs/outages.md).

        Says why at ERROR and marks the channel in run_status; ``Worker.run`` then raises.
        """
        self._stop.set()
        self._lines.say(f"stopping: {regressed}", level=logging.ERROR)
        detail = (
            f"channel {regressed.channel}: saw {regressed.measure} {regressed.seen}, "
            f"the store holds {regressed.found}; see docs/outages.md"
        )
        try:
            self.store.projector().mark_regressed(regressed.channel, detail, self.store.now())
        except Exception as error:  # the loss is already said; the mark is a courtesy
            self._lines.say(f"could not mark it in run_status: {error!r}", level=logging.ERROR)

    def _say_once(self, run_id: Any, what: str, *, level: int = logging.INFO) -> None:
        """Log what holds a run, once for as long as the same thing holds it."""
        if self._last_said.get(str(run_id)) != what:
            self._last_said[str(run_id)] = what
            self._lines.say(f"run {run_id}: {what}", level=level, run_id=run_id)

    def _warn(self, line: str, *, run_id: Any = None) -> None:
        self._lines.say(line, level=logging.WARNING, run_id=run_id)

    def _outage_of(self, run_id: Any) -> Outage:
        """The outage log of one run's workflow (its lines carry the run's id)."""
        return Outage(
            f"worker {self.name}: run {run_id}", lambda line: self._warn(line, run_id=run_id)
        )


def run_until_idle(worker: Worker, *, timeout: float = 30.0) -> None:
    """Run passes until one advances nothing (for scripts and tests)."""
    deadline = time.monotonic() + timeout
    while worker.run_once() and time.monotonic() < deadline:
        pass
