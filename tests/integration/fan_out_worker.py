"""An ``AsyncWorker`` for the fan-out workflow that SIGKILLs itself mid-fan-out.

``fan_out_worker.py URL HOLD``: serves runs of ``fan_out_workflows.py`` four at a time, with a
two-second lease, and kills its own process with SIGKILL right after the ``HOLD``-th step
result is committed, while the other calls are still in flight.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

import actae

spec = importlib.util.spec_from_file_location(
    "fan_out_workflows", Path(__file__).with_name("fan_out_workflows.py")
)
assert spec is not None
assert spec.loader is not None
spec.loader.exec_module(importlib.util.module_from_spec(spec))  # registers "fan-out"


def main() -> None:
    url, hold = sys.argv[1], int(sys.argv[2])
    committed = 0

    def die_after_hold(events: Sequence[object]) -> None:
        nonlocal committed
        committed += sum(getattr(event, "kind", None) == "step.result" for event in events)
        if committed >= hold:
            os.kill(os.getpid(), signal.SIGKILL)

    async def serve() -> None:
        async with actae.open_async(url) as store:
            store.on_commit(die_after_hold)
            worker = actae.AsyncWorker(store, name="doomed", concurrency=4, lease=2.0)
            await worker.run()

    asyncio.run(serve())


if __name__ == "__main__":
    main()
