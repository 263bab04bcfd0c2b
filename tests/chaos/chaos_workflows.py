"""The chaos suite's workflow, run by ``actae worker --import <this file>``.

``chaos`` makes ``CHAOS_STEPS`` steps that each take ``CHAOS_STEP_SECONDS`` and a payment in
the middle. Every call of a step function and of the payment function appends one line to
the call log (``CHAOS_CALL_LOG``), so the test counts executions from what actually ran, not
from what the store says; the payment goes to the mock provider (``CHAOS_PROVIDER``), which
counts requests per idempotency key on its own side.
"""

from __future__ import annotations

import importlib.util
import json
import os
import time
from pathlib import Path
from typing import Any

import actae

CALL_LOG = Path(os.environ.get("CHAOS_CALL_LOG", "/nonexistent"))
STEPS = int(os.environ.get("CHAOS_STEPS", "5"))
STEP_SECONDS = float(os.environ.get("CHAOS_STEP_SECONDS", "0.25"))
EFFECT_LEASE = 5.0
"""Seconds an unanswered payment stays claimed before it is in doubt (and reconciled)."""

_spec = importlib.util.spec_from_file_location(
    "chaos_provider", Path(__file__).parents[1] / "integration" / "provider.py"
)
assert _spec is not None
assert _spec.loader is not None
_provider_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_provider_module)
PROVIDER = _provider_module.MockProvider(Path(os.environ.get("CHAOS_PROVIDER", "/nonexistent")))


def called(ctx: actae.RunContext, name: str) -> None:
    """One line per call, written with one append: lines from processes never interleave."""
    line = {"run": str(ctx.run.run_id), "call": name, "worker": ctx.worker, "at": time.time()}
    with CALL_LOG.open("a") as log:
        log.write(json.dumps(line) + "\n")
        log.flush()


def work(ctx: actae.RunContext, name: str, n: int) -> int:
    called(ctx, name)
    time.sleep(STEP_SECONDS)  # the step's own work (a model call, say), not synchronisation
    return n


@actae.workflow("chaos")
def chaos(ctx: actae.RunContext) -> dict[str, Any]:
    total = 0
    receipt: dict[str, Any] = {}

    def charge(key: str, token: int) -> dict[str, Any]:
        called(ctx, "charge")
        result: dict[str, Any] = PROVIDER.charge(key, 100, token)
        return result

    for n in range(STEPS):

        def step(n: int = n) -> int:
            return work(ctx, f"step-{n}", n)

        total += ctx.step(f"step-{n}", step)
        if n == STEPS // 2:
            receipt = ctx.effect("charge", charge, reconcile=PROVIDER.lookup, lease=EFFECT_LEASE)
    return {"total": total, "charge": receipt}
