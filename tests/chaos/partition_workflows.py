"""The black-hole test's workflow, run by ``actae worker --import <this file>``.

``partitioned`` waits in a first step until the test says go (``PARTITION_GO`` appears: the
second worker is up by then), then makes one payment through the mock provider
(``PARTITION_PROVIDER``) with an effect lease far shorter than the attempt's deadline. The
provider call honours its deadline, as the guarantee requires: it waits for the test to let
it land (``PARTITION_LAND`` appears), and charges only if that happens before
``actae.current_deadline()`` on the store's clock; past the deadline it gives up without
charging. Each call appends one line to ``PARTITION_CALL_LOG``, so the test counts what
ran from the outside.
"""

from __future__ import annotations

import importlib.util
import json
import os
import time
from pathlib import Path
from typing import Any

import actae

CALL_LOG = Path(os.environ.get("PARTITION_CALL_LOG", "/nonexistent"))
LAND = Path(os.environ.get("PARTITION_LAND", "/nonexistent"))
GO = Path(os.environ.get("PARTITION_GO", "/nonexistent"))
EFFECT_LEASE = float(os.environ.get("PARTITION_EFFECT_LEASE", "1"))
TIMEOUT = float(os.environ.get("PARTITION_TIMEOUT", "10"))

_spec = importlib.util.spec_from_file_location(
    "partition_provider", Path(__file__).parents[1] / "integration" / "provider.py"
)
assert _spec is not None
assert _spec.loader is not None
_provider_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_provider_module)
PROVIDER = _provider_module.MockProvider(Path(os.environ.get("PARTITION_PROVIDER", "/nonexistent")))


def logged(ctx: actae.RunContext, call: str, **detail: Any) -> None:
    """One line per call, written with one append: lines from processes never interleave."""
    line = {"call": call, "worker": ctx.worker, "at": time.time(), **detail}
    with CALL_LOG.open("a") as log:
        log.write(json.dumps(line) + "\n")


def within_deadline(store: actae.Store) -> bool:
    """Wait for the test to let the call land; whether it did before the deadline."""
    deadline = actae.current_deadline()
    assert deadline is not None, "a provider call runs inside an effect attempt"
    while store.now() < deadline:
        if LAND.exists():
            return True
        time.sleep(0.02)  # the provider's network round trip, polled against its deadline
    return False


def until_go(ctx: actae.RunContext) -> bool:
    """Wait for the test's go (at most a minute)."""
    logged(ctx, "waiting for go")
    given_up = time.monotonic() + 60
    while not GO.exists():
        if time.monotonic() > given_up:
            raise TimeoutError("the test never said go")
        time.sleep(0.02)  # polling the test's signal
    return True


@actae.workflow("partitioned")
def partitioned(ctx: actae.RunContext) -> dict[str, Any]:
    ctx.step("go", lambda: until_go(ctx))

    def charge(key: str, token: int) -> dict[str, Any]:
        logged(ctx, "calling", token=token)
        if not within_deadline(ctx.store):
            logged(ctx, "gave up at the deadline", token=token)
            raise TimeoutError("the provider call reached its deadline; nothing was charged")
        result: dict[str, Any] = PROVIDER.charge(key, 100, token)
        logged(ctx, "charged", token=token)
        return result

    receipt = ctx.effect(
        "charge", charge, reconcile=PROVIDER.lookup, lease=EFFECT_LEASE, timeout=TIMEOUT
    )
    return {"charge": receipt}
