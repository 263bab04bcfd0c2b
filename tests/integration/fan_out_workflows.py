"""A fan-out workflow for ``actae worker --concurrency``: twenty model calls at once.

Each call appends its index to the file named by ``FAN_OUT_LOG`` when it runs, so a test
can tell executed calls from replayed ones. With ``FAN_OUT_HOLD=12`` the calls from index 12
on never answer: ``fan_out_worker.py`` kills the process meanwhile.
"""

from __future__ import annotations

import asyncio
import functools
import os
from pathlib import Path
from typing import Any

import actae

CALLS = 20


async def model_call(index: int) -> dict[str, Any]:
    """An async LLM client's call: answers at once, unless held back."""
    hold = int(os.environ.get("FAN_OUT_HOLD", CALLS))
    if index >= hold:
        await asyncio.Event().wait()  # never answers in this process
    await asyncio.sleep(0)
    with Path(os.environ["FAN_OUT_LOG"]).open("a") as log:
        log.write(f"{index}\n")
    return {"index": index, "text": f"answer {index}"}


@actae.workflow("fan-out")
async def fan_out(ctx: actae.AsyncRunContext) -> dict[str, Any]:
    """Twenty calls at once; the run's result lists their answers in call order."""
    answers = await ctx.gather(
        *(ctx.step(f"call-{i}", functools.partial(model_call, i)) for i in range(CALLS))
    )
    return {"answers": [answer["index"] for answer in answers]}
