"""``actae demo``: a worker SIGKILLed mid-step, a second that recovers and replays it, a fork."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any, TextIO

from actae.adapters.runtime.store import Store
from actae.adapters.runtime.store import open as open_store
from actae.domain.values import RunInfo

STEPS = 4
CRASH_STEP = 3
CRASH_MARK = "crash-point"


def say(out: TextIO, text: str) -> None:
    """Print one line of the demo's story: the demo's output, not a log line."""
    print(text, file=out, flush=True)


def sample_model(step: int) -> dict[str, Any]:
    """A stand-in LLM: its answers are random, so a re-run would be visible."""
    answer = random.choice(["approve", "escalate", "ask for receipt", "split payment"])  # noqa: S311
    return {"step": step, "answer": answer, "tokens": random.randint(200, 900)}  # noqa: S311


def run_steps(
    store: Store,
    workflow: str,
    channel_id: str,
    worker: str,
    out: TextIO,
    *,
    crash_at: int | None = None,
) -> None:
    """Drive the workflow on from what the store has recorded (a repeat: the same operation ids)."""
    recovery = store.recover(channel_id)
    state, version, cursor = recovery.state.state, recovery.state.version, recovery.head_cursor
    recorded = {
        e.contents()["step"]: e.contents() for e in recovery.events if e.kind == "model.call"
    }
    for step in range(state["step"] + 1, STEPS + 1):
        if step in recorded:
            answer = recorded[step]
            told = f"model answer replayed from the log ({answer['answer']!r}), not sampled again"
        else:
            answer = sample_model(step)
            cursor = store.record(
                channel_id,
                kind="model.call",
                payload=answer,
                expected_cursor=cursor,
                operation_id=f"{workflow}:llm:{step}",
            ).cursor
            told = f"model said {answer['answer']!r} (recorded at cursor {cursor})"
        say(out, f"  [{worker}] step {step}: {told}")
        if step == crash_at:
            say(out, CRASH_MARK)
            signal.pause()  # wait here to be killed
        state = {"step": step, "decisions": [*state.get("decisions", []), answer["answer"]]}
        receipt = store.transition(
            channel_id,
            kind="step.done",
            payload={"step": step},
            state=state,
            expected_version=version,
            expected_cursor=cursor,
            operation_id=f"{workflow}:step:{step}",
        )
        version, cursor = receipt.state_version, receipt.cursor
        pinned = f"state version {version} pinned to cursor {cursor}"
        say(out, f"  [{worker}] step {step} committed: {pinned}")


def crash_worker(url: str, workflow: str, channel_id: str, out: TextIO) -> None:
    """Start worker-1 in its own process and SIGKILL it at the crash point."""
    worker = subprocess.Popen(  # noqa: S603 - our own module, our own interpreter
        [sys.executable, "-m", "actae.adapters.drill.demo", url, workflow, channel_id],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert worker.stdout is not None  # noqa: S101 - stdout=PIPE above
    for line in worker.stdout:
        if line.strip() == CRASH_MARK:
            os.kill(worker.pid, signal.SIGKILL)
            break
        out.write(line)
    worker.wait()
    say(
        out,
        f"  worker-1 killed with SIGKILL (exit status {worker.returncode}) "
        f"after recording step {CRASH_STEP}'s model answer, before committing the step",
    )


def demo(url: str | None, out: TextIO = sys.stdout) -> int:
    """Run the whole story; returns 0 when every check holds."""
    if url is None:
        url = f"sqlite:///{Path(tempfile.mkdtemp(prefix='actae-demo-')) / 'runs.db'}"
    say(out, f"Actae demo on {url}\n")
    workflow = f"invoice-{uuid.uuid4().hex[:8]}"
    with open_store(url) as store:
        run = store.start_run(
            workflow,
            agent_id="planner",
            state={"step": 0},
            pins={"model": "m-large", "prompt": "p3", "tools": "t2", "schema": 1},
            operation_id=f"start:{workflow}",
        )
        channel = str(run.channel_id)
        say(out, f"1. started run {run.run_id}")
        say(out, f"   main channel {channel} at cursor 1, state version 1\n")
        say(out, "2. worker-1 (a separate process) runs the workflow:")
        crash_worker(url, workflow, channel, out)
        recovery = store.recover(channel)
        state = recovery.state
        say(out, "\n3. recover() — a cursor walk over durable history:")
        say(out, f"   state version {state.version} at cursor {state.cursor}: {state.state}")
        for event in recovery.events:
            say(out, f"   then cursor {event.cursor}: {event.kind} {event.payload}")
        say(out, f"   head cursor {recovery.head_cursor}\n")
        say(out, "4. worker-2 resumes from the recovery:")
        run_steps(store, workflow, channel, "worker-2", out)
        return finish(store, run, out)


def finish(store: Store, run: RunInfo, out: TextIO) -> int:
    """Fork, show lineage, and check the story from durable history."""
    events = store.events(run.channel_id)
    calls = [e for e in events if e.kind == "model.call"]
    first_step = next(e for e in events if e.kind == "step.done")
    receipt = store.fork(
        run.channel_id,
        at=first_step.cursor + 1,
        reason="try a cheaper model",
        pins={"model": "m-small"},
        operation_id=f"fork:{run.run_id}",
    )
    forks = len(store.lineage(run.run_id).descendants)
    say(
        out,
        f"\n5. forked at cursor {receipt.requested_boundary} (resolved to "
        f"{receipt.resolved_boundary}, state version {receipt.state_version}) "
        f"with pins {receipt.pins.as_dict()}\n"
        f"   child run {receipt.child_run_id}; lineage of the parent lists "
        f"{forks} fork receipt(s)\n",
    )
    final = store.state_at(run.channel_id)
    ok = len(calls) == STEPS and final.state["step"] == STEPS
    say(
        out,
        f"Result: {STEPS} steps committed, {len(calls)} model calls recorded for {STEPS} "
        f"steps (re-sampled after the crash: {len(calls) - STEPS}), final state version "
        f"{final.version} at cursor {final.cursor}. {'OK' if ok else 'FAILED'}",
    )
    return 0 if ok else 1


def worker_main(url: str, workflow: str, channel_id: str) -> None:
    """Entry point of worker-1 (``python -m actae.adapters.drill.demo URL WORKFLOW CHANNEL``)."""
    with open_store(url) as store:
        run_steps(store, workflow, channel_id, "worker-1", sys.stdout, crash_at=CRASH_STEP)


if __name__ == "__main__":
    worker_main(*sys.argv[1:4])
