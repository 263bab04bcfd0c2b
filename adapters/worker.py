"""Workflows and the worker runtime that runs them, taking over from workers that died.

Register workflow code with ``@actae.workflow("agent-name")``: runs whose ``agent_id`` is
that name are executed by it. A ``Worker`` loops: it keeps the read models current, fires due
timers and expires due approvals, then takes each runnable run under a lease (a row in
``actae_run_leases``, renewed while the workflow runs) and runs the workflow from the top.
Recorded steps replay, so a run whose worker was killed is finished by another worker once
the lease runs out, without repeating completed steps. One owner at a time: the lease says
who should work on a run, and ``expected_cursor`` and fencing tokens refuse a stale owner's
writes even if it comes back.
"""

from __future__ import annotations

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
    IncompatibleResumeError,
    LeaseHeldError,
    RetryNotDueError,
    RunStoppedError,
    RunSuspended,
)

if TYPE_CHECKING:
    from actae.adapters.store import Migration, Store

WorkflowCode = Callable[[RunContext], Mapping[str, Any] | None]


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


REGISTRY = Registry()
COOLDOWN = 5.0
workflow = REGISTRY.workflow


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
        self._cooldown: dict[str, float] = {}  # run -> monotonic time it may be tried again

    def request_stop(self) -> None:
        """Stop after the current run (signal-safe)."""
        self._stop.set()

    def run(self) -> None:
        """Work until ``request_stop()``."""
        while not self._stop.is_set():
            if self.run_once() == 0:
                self._stop.wait(self.poll_interval)

    def run_once(self) -> int:
        """One pass: wake due waits, then run every runnable run it can take."""
        projector = self.store.projector()
        projector.catch_up()
        now = self.store.now()
        advanced = 0
        rows = projector.query(
            "SELECT run_id, agent_id, lifecycle, status, wake_at, "
            "next_retry_at FROM run_status WHERE lifecycle IN "
            "('running', 'waiting') ORDER BY created_at"
        )
        for row in rows:
            if self._stop.is_set():
                break
            if row["lifecycle"] == "waiting":
                if _due(row["wake_at"], now) and self.store.wake_due(row["run_id"]):
                    advanced += 1
                    row = {**row, "lifecycle": "running", "status": "running"}  # noqa: PLW2901
                else:
                    continue
            if self._runnable(row, now) and self._take(row["run_id"], row["agent_id"]):
                advanced += 1
        return advanced

    def _runnable(self, row: Mapping[str, Any], now: datetime) -> bool:
        if self.registry.get(row["agent_id"]) is None or row["status"] == "blocked":
            return False
        if self._cooldown.get(str(row["run_id"]), 0.0) > time.monotonic():
            return False
        return row["status"] != "retrying" or _due(row["next_retry_at"], now)

    def _take(self, run_id: Any, agent: str) -> bool:
        code = self.registry.get(agent)
        assert code is not None  # noqa: S101 - checked by _runnable
        db = self.store.projector().db
        now = self.store.now()
        token = db.acquire_lease(run_id, self.name, now, now + timedelta(seconds=self.lease))
        if token is None:
            return False
        done = threading.Event()
        beater = threading.Thread(target=self._heartbeat, args=(run_id, token, done), daemon=True)
        beater.start()
        try:
            outcome = self._execute(run_id, code)
        finally:
            done.set()
            beater.join()
            db.release_lease(run_id, token, self.store.now())
        self.outcomes.append((run_id, outcome))
        if outcome.startswith("not advanced"):  # do not spin on a run that cannot move
            self._cooldown[str(run_id)] = time.monotonic() + COOLDOWN
        if self._out is not None:
            print(f"[{self.name}] run {run_id}: {outcome}", file=self._out, flush=True)
        return True

    def _heartbeat(self, run_id: Any, token: int, done: threading.Event) -> None:
        db = self.store.projector().db
        while not done.wait(self.lease / 3):
            until = self.store.now() + timedelta(seconds=self.lease)
            if not db.renew_lease(run_id, token, until):
                return

    def _execute(self, run_id: Any, code: Workflow) -> str:
        try:
            ctx = self.store.resume(
                run_id, worker=self.name, pins=code.pins, migrations=code.migrations
            )
            result = code.code(ctx)
            self.store.complete_run(run_id, dict(result or {}))
        except ActaeError as stop:
            return _describe(stop)
        except Exception as error:  # the workflow's own bug fails its run
            self.store.fail_run(run_id, f"{type(error).__name__}: {error}", actor=self.name)
            return "failed"
        return "completed"


OUTCOMES: tuple[tuple[type[ActaeError], Callable[[Any], str]], ...] = (
    (RunSuspended, lambda e: f"waiting for {e.reason} {e.name!r}"),
    (RunStoppedError, lambda e: str(e.status)),
    (RetryNotDueError, lambda e: f"retrying at {e.retry_at.isoformat()}"),
    (EffectBlockedError, lambda e: f"blocked: {e.effect_key} needs review"),
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
