"""The drill's five-agent workflow, as the drill's worker processes run it.

A coordinator makes 7 transitions and delegates to researchers and a writer (model calls), a
payer (a charge the provider first answers 429) and a sleeper (a 24-hour durable timer).
Settings come from ``ACTAE_DRILL_*`` when the process starts, never at import.
"""

from __future__ import annotations

import json
import os
import signal
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from actae.adapters.runtime.store import RunContext
from actae.adapters.runtime.worker import CommitHook, Registry
from actae.domain.effects import RetryPolicy
from actae.domain.errors import RunSuspended

ROLES = ("payer", "sleeper", "researcher", "writer")
DAY = 24 * 3600.0
CRASH_POINTS = ("after-model-call", "during-commit", "after-charge-accepted", "while-waiting")
"""Where a worker may SIGKILL itself (``actae drill --crash-point``)."""
PINS_V1 = {"model": "mock-llm-1", "prompt": "drill-p1", "tools": "drill-t1", "schema": 1}
"""The pins a drill run starts with; a schema-2 worker pins its own schema."""
RETRY = RetryPolicy(max_attempts=6, initial_delay=1.0, max_delay=5.0, max_total=2 * DAY)


@dataclass(frozen=True)
class Settings:
    """What one drill worker process runs with (the drill sets it in the environment)."""

    provider: str = "http://127.0.0.1:9"
    schema: int = 1
    crash: str = ""
    crash_marker: str = ""
    faults: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Settings:
        """The settings in ``environ`` (``ACTAE_DRILL_*``; the defaults where one is unset)."""
        return cls(
            provider=environ.get("ACTAE_DRILL_PROVIDER", cls.provider),
            schema=int(environ.get("ACTAE_DRILL_SCHEMA", "1")),
            crash=environ.get("ACTAE_DRILL_CRASH", ""),
            crash_marker=environ.get("ACTAE_DRILL_CRASH_MARKER", ""),
            faults=frozenset(filter(None, environ.get("ACTAE_DRILL_FAULTS", "").split(","))),
        )


class ProviderError(Exception):
    """An HTTP error from the provider, with its Retry-After."""

    def __init__(self, status: int, retry_after: float | None) -> None:
        super().__init__(f"HTTP {status}")
        self.retry_after = retry_after


class DrillAgents:
    """The five agents' workflow code, as a worker process with ``settings`` runs it."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.pins = {**PINS_V1, "schema": settings.schema}
        self.migrations = {1: lambda state: {**state, "schema": 2}} if settings.schema >= 2 else {}

    def registry(self) -> Registry:
        """The agents' workflows, each under its agent name."""
        registry = Registry()
        for name, code in (
            ("drill-coordinator", self.coordinator),
            ("drill-researcher", self.researcher),
            ("drill-writer", self.writer),
            ("drill-payer", self.payer),
            ("drill-sleeper", self.sleeper),
        ):
            registry.workflow(name, pins=self.pins, migrations=self.migrations)(code)
        return registry

    def on_commit(self) -> CommitHook | None:
        """The worker's ``on_commit`` hook, for the ``during-commit`` crash point."""
        return self._crash_after_commits if self.settings.crash == "during-commit" else None

    def crash_here(self, point: str) -> None:
        """SIGKILL this worker process at ``point``, once per drill run (the marker says so)."""
        marker = self.settings.crash_marker
        if point == self.settings.crash and marker and not os.path.exists(marker):
            with open(marker, "w") as written:
                written.write(point)
            os.kill(os.getpid(), signal.SIGKILL)

    def _crash_after_commits(self, events: Sequence[object]) -> None:
        """For ``during-commit``: die right after a coordinator transition commits, unaware."""
        if any(getattr(e, "kind", "") == "coordinator.step" for e in events):
            self.crash_here("during-commit")

    def call(
        self, path: str, key: str, ctx: RunContext, body: dict[str, Any] | None = None
    ) -> dict[str, Any] | None:
        """POST (with a body) or GET the provider; 404 is None, other errors raise."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(  # noqa: S310 - our own provider on 127.0.0.1
            f"{self.settings.provider}{path}",
            data=data,
            method="GET" if body is None else "POST",
            headers={
                "Idempotency-Key": key,
                "X-Clock": ctx.store.now().isoformat(),
                "Content-Type": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
                result: dict[str, Any] = json.loads(response.read())
                return result
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return None
            retry = error.headers.get("Retry-After")
            raise ProviderError(error.code, float(retry) if retry else None) from None

    def model(self, ctx: RunContext, name: str, prompt: str) -> dict[str, Any]:
        """A sampled model call, recorded once; re-running it would be a new, visible call."""
        key = f"{ctx.run_id}:llm:{name}"

        def ask() -> dict[str, Any]:
            answer = self.call("/llm", key, ctx, {"prompt": prompt}) or {}
            self.crash_here("after-model-call")
            return answer

        return ctx.step(name, ask, usage=lambda a: {"tokens": a["tokens"], "cost": a["cost"]})

    def coordinator(self, ctx: RunContext) -> dict[str, Any]:
        """Seven transitions; delegates, then waits for each group of children."""
        agents = int(ctx.store.state_at(ctx.run.channel_id, cursor=1).state.get("agents", 5))
        notes: list[str] = []

        def done(stage: int, note: str) -> None:
            notes.append(note)
            ctx.transition(
                state={"stage": stage, "notes": list(notes), "schema": self.settings.schema},
                kind="coordinator.step",
                payload={"stage": stage},
            )

        self.model(ctx, "plan", "plan the purchase")
        done(1, "planned")
        roles = [ROLES[i % len(ROLES)] for i in range(agents - 1)]
        kids = [
            (
                role,
                ctx.start_child(
                    f"{ctx.run.workflow_id}:{role}:{i}",
                    agent_id=f"drill-{role}",
                    state={"role": role},
                    pins=self.pins,
                ),
            )
            for i, role in enumerate(roles)
        ]
        done(2, f"delegated to {len(kids)} agents")
        results: dict[str, Any] = {}
        for stage, role in ((3, "researcher"), (4, "payer"), (5, "sleeper"), (6, "writer")):
            for name, child in kids:
                if name == role:
                    results[child.workflow_id] = ctx.wait_for_child(child).payload
            done(stage, f"{role}s done")
        self.model(ctx, "final", "summarize")
        done(7, "finalized")
        return {
            "children": len(kids),
            "charges": [
                r["result"] for r in results.values() if r["result"] and "charge_id" in r["result"]
            ],
        }

    def researcher(self, ctx: RunContext) -> dict[str, Any]:
        """One sampled model call."""
        return {"answer": self.model(ctx, "research", "research suppliers")["text"]}

    def writer(self, ctx: RunContext) -> dict[str, Any]:
        """One sampled model call."""
        return {"draft": self.model(ctx, "write", "write the order")["text"]}

    def payer(self, ctx: RunContext) -> dict[str, Any]:
        """One payment: throttled first, charged once, reconciled if in doubt.

        Under ``payer-retries-in-doubt`` an attempt in doubt is POSTed again under its key.
        """

        def charge(key: str, token: int) -> dict[str, Any]:
            body = {"invoice": ctx.run.workflow_id, "amount": 100, "token": token}
            receipt = self.call("/charges", key, ctx, body)
            self.crash_here("after-charge-accepted")
            return receipt or {}

        if "payer-retries-in-doubt" in self.settings.faults:
            return ctx.effect("charge", charge, retry=RETRY, idempotent=True)
        return ctx.effect(
            "charge",
            charge,
            retry=RETRY,
            reconcile=lambda key: self.call(f"/charges/{key}", key, ctx),
        )

    def sleeper(self, ctx: RunContext) -> dict[str, Any]:
        """Pauses for 24 hours (virtual time), durably."""
        try:
            ctx.sleep(DAY)
        except RunSuspended:
            self.crash_here("while-waiting")
            raise
        return {"slept_hours": 24}
