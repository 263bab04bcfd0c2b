"""Workflows for the clock-skew test, imported by ``actae worker --import <this file>``.

Every call a tool or step makes is logged with the real time of this host (``time.time()``,
which the skewed launcher leaves alone), so the test measures leases, timers and retry
delays from outside Actae.

``throttled``: an effect whose first attempt is refused with Retry-After ``RETRY_AFTER``.
``sleeper``: a durable timer of ``SLEEP`` seconds between two logged steps.
``holder``: an idempotent effect whose tool holds until the test releases it (its lease
must keep every other worker out).
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import actae

CALLS = Path(os.environ.get("ACTAE_TEST_CALLS", "/nonexistent/calls.db"))
RELEASE = Path(os.environ.get("ACTAE_TEST_RELEASE", "/nonexistent/release"))
SLEEP = 3.0
RETRY_AFTER = 3.0
HOLD_AT_MOST = 30.0


def log(what: str, worker: str) -> int:
    """Note a call; how many calls of this kind there have been, this one included."""
    with sqlite3.connect(CALLS, timeout=30, isolation_level=None) as db:
        db.execute("CREATE TABLE IF NOT EXISTS calls (what TEXT, worker TEXT, at REAL)")
        db.execute("INSERT INTO calls VALUES (?, ?, ?)", (what, worker, time.time()))
        (count,) = db.execute("SELECT count(*) FROM calls WHERE what = ?", (what,)).fetchone()
    return int(count)


class ThrottledError(Exception):
    """A provider's HTTP 429."""

    retry_after = RETRY_AFTER


@actae.workflow("holder")
def holder(ctx: actae.RunContext) -> dict[str, object]:
    def charge(key: str, token: int) -> dict[str, object]:
        log("charge", ctx.worker)
        deadline = time.monotonic() + HOLD_AT_MOST
        while not RELEASE.exists() and time.monotonic() < deadline:
            time.sleep(0.02)  # the tool is busy until the test lets it go
        return {"charge_id": key, "token": token}

    # Held for longer than its lease on purpose (heartbeats keep the claim): its deadline
    # must outlast the hold, or its late answer would be in doubt.
    return ctx.effect("charge", charge, idempotent=True, lease=2.0, timeout=HOLD_AT_MOST + 60)


@actae.workflow("sleeper")
def sleeper(ctx: actae.RunContext) -> None:
    ctx.step("slept", lambda: log("slept", ctx.worker))
    ctx.sleep(SLEEP)
    ctx.step("woke", lambda: log("woke", ctx.worker))


@actae.workflow("throttled")
def throttled(ctx: actae.RunContext) -> int:
    def call(key: str, token: int) -> int:
        if log("call", ctx.worker) == 1:
            raise ThrottledError("429 Too Many Requests")
        return token

    quick = actae.RetryPolicy(initial_delay=0.001)  # so that Retry-After alone sets the delay
    return ctx.effect("call", call, lease=2.0, retry=quick)
