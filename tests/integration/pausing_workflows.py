"""Workflows for the pause-during-a-step test, imported by ``actae worker --import <this file>``.

``pausable`` samples a model once (a step whose function notes each call in a file, says it
has begun, and then holds until the test has paused the run), then runs one more step. The
test pauses the run while the first step's function runs, lets it finish, unpauses, and
counts the calls.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import actae

FOLDER = Path(os.environ.get("ACTAE_TEST_FOLDER", "/nonexistent"))
USAGE = {"input_tokens": 700.0, "output_tokens": 112.0, "cost": 0.02}
HOLD = 60.0
"""Seconds the step waits for the test's word before it gives up (the test then fails)."""


def note(name: str) -> None:
    with (FOLDER / "calls").open("a") as calls:
        calls.write(f"{name}\n")


def sample() -> dict[str, Any]:
    """The model call: noted, then held until the test has paused the run."""
    note("sample")
    (FOLDER / "entered").write_text(str(os.getpid()))
    deadline = time.monotonic() + HOLD
    while not (FOLDER / "release").exists() and time.monotonic() < deadline:
        time.sleep(0.01)  # polling the test's word, in another process, with a deadline
    return {"text": "a sampled answer"}


def after() -> str:
    note("after")
    return "done"


@actae.workflow("pausable")
def pausable(ctx: actae.RunContext) -> dict[str, Any]:
    answer = ctx.step("sample", sample, usage=USAGE)
    return {"answer": answer, "after": ctx.step("after", after)}
