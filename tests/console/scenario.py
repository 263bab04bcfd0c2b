"""Runs in every state an operator meets, made by real workflows run by an ``actae.Worker``.

Refunds wait for a finance lead's approval, a mailer is blocked on an email that may have
gone out, a payment is retrying after HTTP 429, research runs finish and get forked, a
planner waits on a child run, an import fails, and a payout's transfer is in doubt (its
worker died holding the claim). The API tests and the browser test (which also screenshots
it for the README) use the same data.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import actae

registry = actae.Registry()

PINS = {"model": "gpt-4.1", "prompt": "refund-v3", "tools": "payments-v2", "schema": 1}


class RateLimitedError(Exception):
    """The payment provider's HTTP 429, with its Retry-After."""

    retry_after = 120.0


@registry.workflow("refund-agent")
def refund(ctx: actae.RunContext) -> dict[str, Any]:
    """Assess a refund, wait for a finance lead, then issue it (idempotent at the provider)."""
    assessment = ctx.step(
        "assess",
        lambda: {"amount": 42.5, "currency": "EUR", "reason": "parcel arrived damaged"},
        usage={"input_tokens": 1840, "output_tokens": 212, "cost": 0.021},
    )
    ctx.transition(state={"stage": "assessed", "amount": assessment["amount"]})
    decision = ctx.wait_for_approval("finance-lead")
    if not decision.approved:
        ctx.transition(state={"stage": "denied", "amount": assessment["amount"]})
        return {"refunded": False}
    receipt = ctx.effect(
        "issue-refund", lambda key, token: {"refund_id": f"rf_{key[:8]}"}, idempotent=True
    )
    ctx.transition(state={"stage": "refunded", "amount": assessment["amount"], **receipt})
    return {"refunded": True, **receipt}


@registry.workflow("mailer")
def mailer(ctx: actae.RunContext) -> dict[str, Any]:
    """Draft and send an email (not idempotent: an unanswered send needs a person)."""
    ctx.step(
        "draft",
        lambda: {"subject": "Your refund is on its way"},
        usage={"input_tokens": 620, "output_tokens": 180, "cost": 0.006},
    )
    sent: dict[str, Any] = ctx.effect("send-email", lambda key, token: {"message_id": "msg_81"})
    return sent


def _charge(key: str, token: int) -> dict[str, Any]:
    raise RateLimitedError("HTTP 429 Too Many Requests from the card processor")


@registry.workflow("payments")
def payments(ctx: actae.RunContext) -> dict[str, Any]:
    """Quote, then charge a card at a provider that answers 429 for now."""
    ctx.step("quote", lambda: {"total": 118.4}, usage={"input_tokens": 410, "output_tokens": 60})
    charged: dict[str, Any] = ctx.effect("charge-card", _charge)
    return charged


@registry.workflow("research")
def research(ctx: actae.RunContext) -> dict[str, Any]:
    """Outline, draft: two model calls, two state versions."""
    outline = ctx.step(
        "outline",
        lambda: ["market size", "competitors", "pricing"],
        usage={"input_tokens": 2300, "output_tokens": 540, "cost": 0.034},
    )
    ctx.transition(state={"outline": outline, "words": 0})
    words = ctx.step(
        "draft", lambda: 1240, usage={"input_tokens": 5100, "output_tokens": 1650, "cost": 0.081}
    )
    ctx.transition(state={"outline": outline, "words": words, "done": True})
    return {"words": words}


@registry.workflow("planner")
def planner(ctx: actae.RunContext) -> dict[str, Any]:
    """Delegate a quote to a child run and wait for it."""
    child = ctx.start_child(f"{ctx.run.workflow_id}-quote", agent_id="quoter", state={})
    answer = ctx.wait_for_child(child)
    return {"quote": answer.payload.get("result")}


@registry.workflow("importer")
def importer(ctx: actae.RunContext) -> dict[str, Any]:
    """Read a CSV export that lacks a column: the run fails."""
    ctx.step("fetch", lambda: {"rows": 1200})
    raise ValueError("CSV column 'amount' is missing from the export")


@dataclass
class Scenario:
    """A store, its clock and a worker, and helpers that make a run in a given state."""

    store: actae.Store
    clock: actae.ManualClock
    worker: actae.Worker = field(init=False)
    _numbers: itertools.count[int] = field(default_factory=lambda: itertools.count(4711))

    def __post_init__(self) -> None:
        self.worker = actae.Worker(self.store, name="worker-1", registry=registry)

    def _id(self, prefix: str) -> str:
        return f"{prefix}-{next(self._numbers)}"

    def start(self, prefix: str, agent: str, **state: Any) -> actae.RunInfo:
        """A new run of ``agent`` (pinned), not yet taken by the worker."""
        return self.store.start_run(self._id(prefix), agent_id=agent, state=state, pins=PINS)

    def work(self) -> None:
        """One worker pass over every runnable run (the read models catch up at its end)."""
        self.worker.run_once()

    def waiting(self) -> actae.RunInfo:
        """A refund waiting for the approval ``finance-lead``."""
        run = self.start("refund", "refund-agent", order="A-1042")
        self.work()
        return run

    def blocked(self) -> tuple[actae.RunInfo, str]:
        """A mailer whose send is in doubt and needs review; its key."""
        run = self.start("notify", "mailer", customer="C-88")
        key = self.doubt(run, "send-email")
        self.work()
        return run, key

    def doubt(self, run: actae.RunInfo, name: str) -> str:
        """Leave the run's first ``ctx.effect(name)`` in doubt: claimed by a worker that died."""
        key = f"{run.run_id}:effect:{name}:1"
        self.store.claim(
            key, run_id=run.run_id, worker="worker-2", lease=30.0, request={"name": name}
        )
        self.clock.advance(31)
        return key

    def in_doubt(self) -> tuple[actae.RunInfo, str]:
        """A payout (no worker serves it) whose transfer is in doubt; its key."""
        run = self.start("payout", "payouts", amount=250)
        key = self.doubt(run, "transfer")
        self.store.projector().catch_up()
        return run, key

    def retrying(self) -> actae.RunInfo:
        """A payment whose card charge waits for its retry after HTTP 429."""
        run = self.start("charge", "payments", invoice="INV-2207")
        self.work()
        return run

    def running(self) -> actae.RunInfo:
        """A run no worker serves yet: running, untouched."""
        return self.start("triage", "triage-agent", ticket="T-311")

    def failed(self) -> actae.RunInfo:
        """An import that failed on a missing column."""
        run = self.start("import", "importer", file="orders.csv")
        self.work()
        return run

    def forked(self) -> tuple[actae.RunInfo, actae.ForkReceipt]:
        """A finished research run and a fork of it at its first state version, finished too."""
        run = self.start("research", "research", topic="EU e-bike market")
        self.work()
        fork = self.store.fork(
            run.channel_id,
            at=3,
            reason="retry the draft with a cheaper model",
            pins={"model": "gpt-4.1-mini"},
        )
        self.work()
        return run, fork

    def delegating(self) -> actae.RunInfo:
        """A planner waiting for the child run it started."""
        run = self.start("plan", "planner", goal="Q3 restock")
        self.work()
        return run

    def populate(self) -> dict[str, Any]:
        """One run of every kind, spaced out in time as a real day would be."""
        made: dict[str, Any] = {}
        for name in ("forked", "failed", "delegating", "blocked", "waiting"):
            made[name] = getattr(self, name)()
            self.clock.advance(7 * 60)
        made["retrying"] = self.retrying()  # its retry is due in 2 minutes: no later pass is
        made["waiting_too"] = self.waiting()
        made["in_doubt"] = self.in_doubt()
        made["running"] = self.running()
        paused = self.running()
        self.store.pause(paused.run_id, actor="dana", reason="customer asked to hold")
        made["paused"] = paused
        self.store.projector().catch_up()
        return made
