"""A run whose worker is SIGKILLed mid-way and taken over by another process is one trace."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from opentelemetry import trace

import actae
from tests.helpers import wait_for
from tests.telemetry.recorded import Spans, context_of

HERE = Path(__file__).parent
TIMEOUT = 60


def worker(url: str, name: str, spans: Path, marker: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(HERE / "traced_worker.py"), url, name, str(spans), str(marker)],
        stderr=subprocess.DEVNULL,
        text=True,
    )


def exported(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_run_taken_over_after_a_kill_is_one_trace(
    durable_url: str, tmp_path: Path, spans: Spans
) -> None:
    marker = tmp_path / "hung"
    first_spans, second_spans = tmp_path / "w1.jsonl", tmp_path / "w2.jsonl"
    with actae.open(durable_url) as store:
        with trace.get_tracer("test").start_as_current_span("enqueue"):
            run = store.start_run("takeover", agent_id="sampler", state={})
        first = worker(durable_url, "w1", first_spans, marker)
        wait_for(marker.exists, "worker 1 to hang in the last step", within=TIMEOUT)
        os.kill(first.pid, signal.SIGKILL)
        assert first.wait(TIMEOUT) == -signal.SIGKILL

        second = worker(durable_url, "w2", second_spans, marker)
        try:
            wait_for(
                lambda: store.run(run.run_id).status is actae.RunStatus.COMPLETED,
                "worker 2 to finish the run",
                within=TIMEOUT,
            )
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(TIMEOUT)

    enqueue = context_of(spans.one("enqueue"))
    trace_id, start_span_id = f"{enqueue.trace_id:032x}", f"{enqueue.span_id:016x}"
    killed, survivor = exported(first_spans), exported(second_spans)
    # The killed worker's turn never ended (its actae.run span died with it); its steps did.
    assert [span["name"] for span in killed] == ["actae.step first", "actae.step second"]
    assert [span["name"] for span in survivor] == [
        "actae.step first",
        "actae.step second",
        "actae.step last",
        "actae.run",
    ]
    assert {span["trace_id"] for span in killed + survivor} == {trace_id}
    (turn,) = (span for span in survivor if span["name"] == "actae.run")
    assert turn["parent_id"] == start_span_id  # under the start, not under the dead turn
    assert {span["parent_id"] for span in survivor[:3]} == {turn["span_id"]}
    assert len({span["parent_id"] for span in killed}) == 1  # the dead turn's span
    assert [span["attributes"]["actae.replayed"] for span in survivor[:3]] == [True, True, False]
