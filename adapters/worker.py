"""Workflows and the worker runtime that runs them, taking over from workers that died.

Register workflow code with ``@actae.workflow("agent-name")``: runs whose ``agent_id`` is
that name are executed by it. A ``Worker`` loops: it keeps the read models current, fires due
timers and expires due approvals, then takes each runnable run under a lease (a row in
``actae_run_leases``, renewed while the workflow runs) and runs the workflow from the top.
Recorded steps replay, so a run whose worker was killed is finished by another worker once
the lease runs out, without repeating completed steps. One owner at a time: the lease says
who should work on a run, and ``expected_cursor`` and fencing tokens refuse a stale owner's
writes even if it comes back.

A worker never spins and never stays silent: a run that cannot advance is left alone until
the reason ends on the store's clock (a lease's expiry, a retry's due time); each worker
advertises the agents it runs (``actae_worker_agents``), so run_status names a running run
that no live worker serves, and the worker logs such a run once; a ``ValidationError`` from
workflow code fails the run, since running the same code again fails the same way.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TextIO

from actae.adapters.context import RunContext
from actae.domain.errors import (
    ActaeError,
    ConflictError,
    EffectBlockedError,
    IllegalTransitionError,
    IncompatibleResumeError,
    LeaseHeldError,
    RetryNotDueError,
    RunStoppedError,
    RunSuspended,
    ValidationError,
)

if TYPE_CHECKING:
    from actae.adapters.store import Store
    from actae.adapters.store_resume import Migration

WorkflowCode = Callable[[RunContext], object]
"""Workflow code: returns the run's result (a mapping, None, or any JSON value)."""


@dataclass(frozen=True)
class Workflow:
    """Workflow code for one agent name, with the pins and migrations it runs under."""

    name: str
    code: WorkflowCode
    pins: Mapping[str, Any] | None = None
    migrations: Mapping[int, Migration] = field(default_factory=dict)


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
    ) -> Callable[[WorkflowCode], WorkflowCode]:
        """Decorator: run ``code(ctx)`` for runs whose ``agent_id`` is ``name``."""

        def register(code: WorkflowCode) -> WorkflowCode:
            self._workflows[name] = Workflow(name, code, pins, dict(migrations or {}))
            return code

        return register

    def get(self, name: str) -> Workflow | None:
        """The workflow registered for ``name``."""
        return self._workflows.get(name)

    def names(self) -> list[str]:
        """The agent names that have a workflow here."""
        return sorted(self._workflows)


REGISTRY = Registry()
COOLDOWN = 5.0
"""Seconds before a run that could not advance, for a reason with no known end, is tried again."""
CONFLICT_COOLDOWN = 1.0
"""Seconds before a run that lost a write to another writer is tried again."""
workflow = REGISTRY.workflow
CANDIDATES = (
    "SELECT run_id, agent_id, lifecycle, status, unserved, wake_at, next_retry_at "
    "FROM run_status WHERE lifecycle IN ('running', 'waiting') ORDER BY created_at"
)


@dataclass(frozen=True)
class Cooldown:
    """When a run that could not advance is worth trying again.

    ``until`` is on the store's clock, which leases and retry times are on (a virtual clock
    in tests and drills); ``or_after`` is a ``time.monotonic()`` moment that also ends a
    short pause whose reason is not tied to the store's clock (infinite when it is).
    """

    until: datetime
    or_after: float = math.inf

    @classmethod
    def short(cls, now: datetime, seconds: float) -> Cooldown:
        """A pause of ``seconds`` on whichever clock passes them first."""
        return cls(now + timedelta(seconds=seconds), time.monotonic() + seconds)

    def over(self, now: datetime) -> bool:
        """Whether the run may be tried again at ``now`` (store time)."""
        return now >= self.until or time.monotonic() >= self.or_after


def cooldown_for(stop: ActaeError, now: datetime) -> Cooldown | None:
    """How long a run that stopped with ``stop`` cannot advance (None: it moved on).

    A suspended or stopped run left the runnable set: the read model stops offering it,
    and it must run as soon as it is woken or unpaused. Everything else would fail the same
    way at once: a dead worker's effect lease until it expires, a retry until it is due.
    """
    if isinstance(stop, RunSuspended | RunStoppedError):
        return None
    if isinstance(stop, LeaseHeldError):
        return Cooldown(stop.expires_at)
    if isinstance(stop, RetryNotDueError):
        return Cooldown(stop.retry_at)
    if isinstance(stop, ConflictError):
        return Cooldown.short(now, CONFLICT_COOLDOWN)
    return Cooldown.short(now, COOLDOWN)


class Worker:
    """Runs registered workflows: picks up runnable runs, due timers and expired waits."""

    def __init__(
        self,
        store: Store,
        *,
        name: str,
        registry: Registry = REGISTRY,
        lease: float = 30.0,
        poll_interval: float = 0.2,
        out: TextIO | None = None,
    ) -> None:
        self.store = store
        self.name = name
        self.registry = registry
        self.lease = lease
        self.poll_interval = poll_interval
        self._out = out
        self._stop = threading.Event()
        self.outcomes: list[tuple[Any, str]] = []
        self._cooldowns: dict[str, Cooldown] = {}
        self._advertised_until: datetime | None = None
        self._last_said: dict[str, str] = {}  # run -> what was last logged about it

    def request_stop(self) -> None:
        """Stop after the current run (signal-safe)."""
        self._stop.set()

    def run(self) -> None:
        """Work until ``request_stop()``; sleeps between passes that advanced nothing."""
        try:
            while not self._stop.is_set():
                if self.run_once() == 0:
                    self._stop.wait(self.poll_interval)
        finally:
            self.withdraw()

    def withdraw(self) -> None:
        """Stop advertising this worker's agents (it is stopping: it serves nothing now)."""
        self.store.projector().db.advertise(self.name, [], self.store.now())
        self._advertised_until = None

    def run_once(self) -> int:
        """One pass: wake due waits, run every runnable run it can take; how many advanced.

        A run that could not advance (another worker's lease, a retry not due) does not
        count and is not tried again before its cooldown ends, so ``run()`` sleeps instead
        of spinning. The pass ends by catching the read models up, so what it did shows in
        run_status as soon as it returns (``actae worker --once``).
        """
        projector = self.store.projector()
        projector.catch_up()
        now = self.store.now()
        self._advertise(now)
        projector.db.mark_unserved(now)
        advanced = 0
        for row in projector.query(CANDIDATES):
            if self._stop.is_set():
                break
            advanced += self._isolated(row, now)
        projector.catch_up()
        return advanced

    def _isolated(self, row: Mapping[str, Any], now: datetime) -> int:
        """Serve one run; whatever goes wrong with it stays with it (poison isolation).

        A failure the run's own handling did not absorb (its error could not even be
        recorded) leaves the run to its cooldown and the other runs keep going.
        """
        try:
            return self._serve(row, now)
        except Exception as error:  # one run must never stop the worker
            run_id = str(row["run_id"])
            self._cooldowns[run_id] = Cooldown.short(now, COOLDOWN)
            self._say(f"run {run_id}: not advanced: {printable(repr(error))}")
            return 0

    def _serve(self, row: Mapping[str, Any], now: datetime) -> int:
        """Wake the run if due, then run it if it is runnable here; how many moves it made."""
        woke = 0
        if row["lifecycle"] == "waiting":
            if not (_due(row["wake_at"], now) and self.store.wake_due(row["run_id"])):
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
                )
            return woke
        if self._runnable(row, now) and self._take(row["run_id"], code):
            return woke + 1
        return woke

    def _runnable(self, row: Mapping[str, Any], now: datetime) -> bool:
        if row["status"] == "blocked":
            return False
        cooldown = self._cooldowns.get(str(row["run_id"]))
        if cooldown is not None:
            if not cooldown.over(now):
                return False
            del self._cooldowns[str(row["run_id"])]
        return row["status"] != "retrying" or _due(row["next_retry_at"], now)

    def _advertise(self, now: datetime) -> None:
        """Renew this worker's advertisement of its agents once a third of the lease is gone."""
        fresh = self._advertised_until
        if fresh is not None and now < fresh - timedelta(seconds=self.lease * 2 / 3):
            return
        until = now + timedelta(seconds=self.lease)
        self.store.projector().db.advertise(self.name, self.registry.names(), until)
        self._advertised_until = until

    def _take(self, run_id: Any, code: Workflow) -> bool:
        """Run the workflow under the run's lease; whether the run advanced."""
        db = self.store.projector().db
        now = self.store.now()
        token = db.acquire_lease(run_id, self.name, now, now + timedelta(seconds=self.lease))
        if token is None:
            return False
        done = threading.Event()
        beater = threading.Thread(target=self._heartbeat, args=(run_id, token, done), daemon=True)
        beater.start()
        try:
            outcome, cooldown = self._execute(run_id, code)
        finally:
            done.set()
            beater.join()
            db.release_lease(run_id, token, self.store.now())
        self.outcomes.append((run_id, outcome))
        if cooldown is not None:
            self._cooldowns[str(run_id)] = cooldown
        self._say_once(run_id, outcome)
        return cooldown is None

    def _heartbeat(self, run_id: Any, token: int, done: threading.Event) -> None:
        db = self.store.projector().db
        while not done.wait(self.lease / 3):
            now = self.store.now()
            # A long workflow must not make its agent look unserved; a failed renewal is
            # retried on the next beat and must never stop the run lease's renewal below.
            with contextlib.suppress(Exception):
                self._advertise(now)
            if not db.renew_lease(run_id, token, now + timedelta(seconds=self.lease)):
                return

    def _execute(self, run_id: Any, code: Workflow) -> tuple[str, Cooldown | None]:
        """Run the workflow from the top: what happened, and how long to leave the run be."""
        try:  # a resume refused (say, this worker's pins are invalid) is not the run's fault
            ctx = self.store.resume(
                run_id, worker=self.name, pins=code.pins, migrations=code.migrations
            )
        except ActaeError as stop:
            return _describe(stop), cooldown_for(stop, self.store.now())
        try:
            result = code.code(ctx)
            self.store.complete_run(run_id, _run_result(result))
        except ValidationError as invalid:  # the same code fails the same way: final
            return self._fail(run_id, invalid), None
        except ActaeError as stop:
            return _describe(stop), cooldown_for(stop, self.store.now())
        except Exception as error:  # the workflow's own bug fails its run
            return self._fail(run_id, error), None
        return "completed", None

    def _fail(self, run_id: Any, error: Exception) -> str:
        """Fail the run with ``error`` unless it failed already (``ctx.step`` does that)."""
        message = printable(f"{type(error).__name__}: {error}")
        with contextlib.suppress(IllegalTransitionError):
            self.store.fail_run(run_id, message, actor=self.name)
        return f"failed: {message}"

    def _say_once(self, run_id: Any, what: str) -> None:
        """Log what holds a run, once for as long as the same thing holds it."""
        if self._last_said.get(str(run_id)) != what:
            self._last_said[str(run_id)] = what
            self._say(f"run {run_id}: {what}")

    def _say(self, line: str) -> None:
        if self._out is not None:
            print(f"[{self.name}] {line}", file=self._out, flush=True)


OUTCOMES: tuple[tuple[type[ActaeError], Callable[[Any], str]], ...] = (
    (RunSuspended, lambda e: f"waiting for {e.reason} {e.name!r}"),
    (RunStoppedError, lambda e: str(e.status)),
    (RetryNotDueError, lambda e: f"retrying at {e.retry_at.isoformat()}"),
    (EffectBlockedError, lambda e: f"blocked: effect {e.effect_key} is {e.status}"),
    (IncompatibleResumeError, lambda e: f"left for a compatible worker: {e}"),
    (ConflictError, lambda e: f"lost to another worker: {e}"),
    (LeaseHeldError, lambda e: f"lost to another worker: {e}"),
)


def _describe(stop: ActaeError) -> str:
    """Why a workflow did not finish in this pass."""
    for kind, describe in OUTCOMES:
        if isinstance(stop, kind):
            return describe(stop)
    return f"not advanced: {stop}"


def printable(text: str) -> str:
    """``text`` that any store and log can hold: lone surrogates and NULs escaped.

    Model output cut mid-character ends up in exception messages; recording it as it is
    would fail the very write that records the failure.
    """
    return text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")


def _run_result(returned: object) -> dict[str, Any]:
    """A run's result from what its workflow returned.

    A run's result is a JSON object: a mapping is kept as it is, nothing becomes ``{}``, and
    any other value (a string, a list, ``0``) is kept under ``"value"``.
    """
    if returned is None:
        return {}
    if isinstance(returned, Mapping):
        return dict(returned)
    return {"value": returned}


def _due(at: Any, now: datetime) -> bool:
    if at is None:
        return False
    moment = datetime.fromisoformat(at) if isinstance(at, str) else at
    return bool(moment <= now)


def run_until_idle(worker: Worker, *, timeout: float = 30.0) -> None:
    """Run passes until one advances nothing (for scripts and tests)."""
    deadline = time.monotonic() + timeout
    while worker.run_once() and time.monotonic() < deadline:
        pass
