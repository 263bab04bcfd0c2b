"""The workflow of ``test_regressed_history.py``, run by ``actae worker --import <this file>``.

``regress`` records step ``a``, then runs step ``b``, which says it started (the file
``started`` in ``REGRESS_DIR``) and returns once the test has deleted rows behind the
store's back (the file ``lost``), so the step's result is written on a history that lost
step ``a``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import actae

FOLDER = Path(os.environ.get("REGRESS_DIR", "/nonexistent"))
DEADLINE = 60.0


def after_the_loss() -> int:
    """Step b: tell the test it runs, then wait for the test's deletion (with a deadline)."""
    (FOLDER / "started").touch()
    deadline = time.monotonic() + DEADLINE
    while not (FOLDER / "lost").exists():
        if time.monotonic() > deadline:
            raise TimeoutError("the test never deleted the rows")
        time.sleep(0.01)  # polling the test process's progress
    return 2


@actae.workflow("regress")
def regress(ctx: actae.RunContext) -> None:
    ctx.step("a", lambda: 1)
    ctx.step("b", after_the_loss)
