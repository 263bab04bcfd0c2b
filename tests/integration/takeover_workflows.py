"""Workflows for the takeover test, imported by ``actae worker --import <this file>``.

``sampler`` records two random samples, then a step whose function waits forever the first
time (after leaving a marker file), so the test can SIGKILL the worker at a known point.
"""

from __future__ import annotations

import os
import random
import signal
from pathlib import Path
from typing import Any

import actae

MARKER = Path(os.environ.get("ACTAE_TEST_MARKER", "/nonexistent"))


def hang_the_first_time() -> str:
    if not MARKER.exists():
        MARKER.write_text(str(os.getpid()))
        signal.pause()  # killed here by the test
    return "finished"


@actae.workflow("sampler")
def sampler(ctx: actae.RunContext) -> dict[str, Any]:
    first = ctx.step("first", random.random)
    second = ctx.step("second", random.random)
    last = ctx.step("last", hang_the_first_time)
    return {"first": first, "second": second, "last": last}
