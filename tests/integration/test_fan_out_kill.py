"""Dynamic fan-out survives a kill: 20 calls at once, SIGKILL after 12, the re-run runs 8.

A real worker process runs an ``async def`` workflow that awaits twenty model calls with
``ctx.gather``. It is SIGKILLed right after the twelfth result commits. A second worker,
started as ``actae worker --concurrency 4``, takes the run over once the lease runs out:
the twelve recorded calls replay, only the eight missing ones run, and the run's result
lists all twenty answers in call order.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import actae
from tests.helpers import wait_for

HERE = Path(__file__).parent


def test_a_killed_fan_out_resumes_running_only_the_missing_calls(
    durable_url: str, tmp_path: Path
) -> None:
    with actae.open(durable_url) as store:
        run = store.start_run("fan", agent_id="fan-out", state={})
    first_log, second_log = tmp_path / "first.log", tmp_path / "second.log"

    doomed = subprocess.run(
        [sys.executable, str(HERE / "fan_out_worker.py"), durable_url, "12"],
        env={**os.environ, "FAN_OUT_LOG": str(first_log), "FAN_OUT_HOLD": "12"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert doomed.returncode == -signal.SIGKILL, doomed.stderr
    ran_first = sorted(int(line) for line in first_log.read_text().split())
    assert ran_first == list(range(12))
    with actae.open(durable_url) as store:
        recorded = [e for e in store.events(run.channel_id) if e.kind == "step.result"]
        assert len(recorded) == 12
        assert store.run(run.run_id).status is actae.RunStatus.RUNNING

        takeover = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "actae.adapters.cli",
                "worker",
                "--db",
                durable_url,
                "--import",
                str(HERE / "fan_out_workflows.py"),
                "--concurrency",
                "4",
                "--name",
                "takeover",
            ],
            env={**os.environ, "FAN_OUT_LOG": str(second_log)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_for(
                lambda: store.run(run.run_id).status is actae.RunStatus.COMPLETED,
                "the second worker to finish the run",
            )
        finally:
            takeover.send_signal(signal.SIGTERM)
            _, errors = takeover.communicate(timeout=60)
        assert takeover.returncode == 0, errors
        result = store.run(run.run_id).result
    assert sorted(int(line) for line in second_log.read_text().split()) == list(range(12, 20))
    assert result == {"answers": list(range(20))}
