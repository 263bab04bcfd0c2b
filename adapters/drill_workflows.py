"""The drill's five-agent workflow, run by ``actae worker --import actae.adapters.drill_workflows``.

A coordinator makes 7 state transitions and delegates to child agents: researchers and a
writer (sampled model calls through the mock LLM), a payer (a payment through the mock
provider, which answers 429 with Retry-After first), and a sleeper (a 24-hour durable timer).
``ACTAE_DRILL_SCHEMA`` is the state schema this worker's code speaks: schema-2 workers carry
the migration from schema 1, so a run started under schema 1 is upgraded mid-run when they
take it over. ``ACTAE_DRILL_FAULTS`` (comma-separated) injects faults the report must catch:
``payer-retries-in-doubt`` makes the payer POST again under the same key when its charge is
in doubt, instead of asking the provider what happened.
"""

from __future__ import annotations

import json
import os
import signal
import urllib.error
import urllib.request
from typing import Any

import actae
from actae.adapters.context import RunContext
from actae.domain.service import ActaeService

PROVIDER = os.environ.get("ACTAE_DRILL_PROVIDER", "http://127.0.0.1:9")
SCHEMA = int(os.environ.get("ACTAE_DRILL_SCHEMA", "1"))
ROLES = ("payer", "sleeper", "researcher", "writer")
DAY = 24 * 3600.0
PINS = {"model": "mock-llm-1", "prompt": "drill-p1", "tools": "drill-t1", "schema": SCHEMA}
MIGRATIONS = {1: lambda state: {**state, "schema": 2}} if SCHEMA >= 2 else {}
CRASH_POINTS = ("after-model-call", "during-commit", "after-charge-accepted", "while-waiting")
CRASH = os.environ.get("ACTAE_DRILL_CRASH", "")
CRASH_MARKER = os.environ.get("ACTAE_DRILL_CRASH_MARKER", "")
FAULTS = frozenset(filter(None, os.environ.get("ACTAE_DRILL_FAULTS", "").split(",")))


def crash_here(point: str) -> None:
    """SIGKILL this worker process at ``point``, once per drill run (the marker says so)."""
    if point == CRASH and CRASH_MARKER and not os.path.exists(CRASH_MARKER):
        with open(CRASH_MARKER, "w") as marker:
            marker.write(point)
        os.kill(os.getpid(), signal.SIGKILL)


def _crash_after_commits() -> None:
    """For ``during-commit``: die right after a coordinator transition commits.

    The worker never learns that the commit happened: the ambiguous commit.
    """
    original = ActaeService.save

    def save(self: ActaeService, *objs: Any, **kwargs: Any) -> Any:
        events = [e for obj in objs for e in getattr(obj, "pending_events", [obj])]
        positions = original(self, *objs, **kwargs)
        if any(getattr(e, "kind", "") == "coordinator.step" for e in events):
            crash_here("during-commit")
        return positions

    ActaeService.save = save  # type: ignore[method-assign]


if CRASH == "during-commit":
    _crash_after_commits()

RETRY = actae.RetryPolicy(max_attempts=6, initial_delay=1.0, max_delay=5.0, max_total=2 * DAY)


class ProviderError(Exception):
    """An HTTP error from the provider, with its Retry-After."""

    def __init__(self, status: int, retry_after: float | None) -> None:
        super().__init__(f"HTTP {status}")
        self.retry_after = retry_after


def call(
    path: str, key: str, ctx: RunContext, body: dict[str, Any] | None = None
) -> dict[str, Any] | None:
    """POST (with a body) or GET the provider; 404 is None, other errors raise."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(  # noqa: S310 - our own provider on 127.0.0.1
        f"{PROVIDER}{path}",
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


def model(ctx: RunContext, name: str, prompt: str) -> dict[str, Any]:
    """A sampled model call, recorded once; re-running it would be a new, visible call."""
    key = f"{ctx.run_id}:llm:{name}"

    def ask() -> dict[str, Any]:
        answer = call("/llm", key, ctx, {"prompt": prompt}) or {}
        crash_here("after-model-call")
        return answer

    return ctx.step(name, ask, usage=lambda a: {"tokens": a["tokens"], "cost": a["cost"]})


@actae.workflow("drill-coordinator", pins=PINS, migrations=MIGRATIONS)
def coordinator(ctx: RunContext) -> dict[str, Any]:
    """Seven transitions; delegates, then waits for each group of children."""
    agents = int(ctx.store.state_at(ctx.run.channel_id, cursor=1).state.get("agents", 5))
    notes: list[str] = []

    def done(stage: int, note: str) -> None:
        notes.append(note)
        ctx.transition(
            state={"stage": stage, "notes": list(notes), "schema": SCHEMA},
            kind="coordinator.step",
            payload={"stage": stage},
        )

    model(ctx, "plan", "plan the purchase")
    done(1, "planned")
    roles = [ROLES[i % len(ROLES)] for i in range(agents - 1)]
    kids = [
        (
            role,
            ctx.start_child(
                f"{ctx.run.workflow_id}:{role}:{i}",
                agent_id=f"drill-{role}",
                state={"role": role},
                pins=PINS,
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
    model(ctx, "final", "summarize")
    done(7, "finalized")
    return {
        "children": len(kids),
        "charges": [
            r["result"] for r in results.values() if r["result"] and "charge_id" in r["result"]
        ],
    }


@actae.workflow("drill-researcher", pins=PINS, migrations=MIGRATIONS)
def researcher(ctx: RunContext) -> dict[str, Any]:
    """One sampled model call."""
    return {"answer": model(ctx, "research", "research suppliers")["text"]}


@actae.workflow("drill-writer", pins=PINS, migrations=MIGRATIONS)
def writer(ctx: RunContext) -> dict[str, Any]:
    """One sampled model call."""
    return {"draft": model(ctx, "write", "write the order")["text"]}


@actae.workflow("drill-payer", pins=PINS, migrations=MIGRATIONS)
def payer(ctx: RunContext) -> dict[str, Any]:
    """One payment: throttled first, charged once, reconciled if in doubt.

    Under the ``payer-retries-in-doubt`` fault the charge is declared idempotent and has no
    reconcile, so an attempt in doubt is POSTed again under its key: the provider's ledger
    then shows a replay, or a second execution if the provider ignores the key.
    """

    def charge(key: str, token: int) -> dict[str, Any]:
        receipt = call(
            "/charges", key, ctx, {"invoice": ctx.run.workflow_id, "amount": 100, "token": token}
        )
        crash_here("after-charge-accepted")
        return receipt or {}

    if "payer-retries-in-doubt" in FAULTS:
        return ctx.effect("charge", charge, retry=RETRY, idempotent=True)
    return ctx.effect(
        "charge", charge, retry=RETRY, reconcile=lambda key: call(f"/charges/{key}", key, ctx)
    )


@actae.workflow("drill-sleeper", pins=PINS, migrations=MIGRATIONS)
def sleeper(ctx: RunContext) -> dict[str, Any]:
    """Pauses for 24 hours (virtual time), durably."""
    try:
        ctx.sleep(DAY)
    except actae.RunSuspended:
        crash_here("while-waiting")
        raise
    return {"slept_hours": 24}
