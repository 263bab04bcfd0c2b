"""A worker process SIGKILLed mid-run is replaced by another that finishes without repeats."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import actae

HERE = Path(__file__).parent
TIMEOUT = 60


def wait_for(condition: object, what: str) -> None:
    assert callable(condition)
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)  # polling a condition in other processes, with a deadline


def worker(url: str, name: str, marker: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "actae.adapters.cli.main",
            "worker",
            "--db",
            url,
            "--import",
            str(HERE / "takeover_workflows.py"),
            "--name",
            name,
            "--lease",
            "2",
            "--poll-interval",
            "0.05",
        ],
        env={**os.environ, "ACTAE_TEST_MARKER": str(marker)},
        stderr=subprocess.DEVNULL,
        text=True,
    )


def test_a_killed_worker_is_replaced_without_repeating_steps(
    durable_url: str, tmp_path: Path
) -> None:
    marker = tmp_path / "reached"
    with actae.open(durable_url) as store:
        run = store.start_run("takeover", agent_id="sampler", state={})
        first = worker(durable_url, "w1", marker)
        wait_for(marker.exists, "worker 1 to reach the last step")
        os.kill(first.pid, signal.SIGKILL)
        assert first.wait(TIMEOUT) == -signal.SIGKILL
        before = [
            e.contents()["value"] for e in store.events(run.channel_id) if e.kind == "step.result"
        ]
        assert len(before) == 2

        second = worker(durable_url, "w2", marker)
        try:
            wait_for(
                lambda: store.run(run.run_id).status is actae.RunStatus.COMPLETED,
                "worker 2 to finish the run",
            )
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(TIMEOUT)

        done = store.run(run.run_id)
        assert done.result == {"first": before[0], "second": before[1], "last": "finished"}
        steps = [
            e.contents()["name"] for e in store.events(run.channel_id) if e.kind == "step.result"
        ]
        assert steps == ["first", "second", "last"]
