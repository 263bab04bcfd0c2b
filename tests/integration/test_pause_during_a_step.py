"""A real worker process: a run paused while a step runs keeps the step's result (item 5).

The step's function (a model call) holds until the test has paused the run, then returns.
Its result and usage are recorded, the run stops at the next boundary, and after
``unpause`` the worker replays the step: the function ran exactly once and its usage is
counted once, in the run and in the read models.
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
TIMEOUT = 60
USAGE = {"input_tokens": 700.0, "output_tokens": 112.0, "cost": 0.02}  # the step's


def worker(url: str, folder: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "actae.adapters.cli.main",
            "worker",
            "--db",
            url,
            "--import",
            str(HERE / "pausing_workflows.py"),
            "--name",
            "w1",
            "--poll-interval",
            "0.05",
        ],
        env={**os.environ, "ACTAE_TEST_FOLDER": str(folder)},
        stderr=subprocess.DEVNULL,
        text=True,
    )


def step_names(store: actae.Store, run: actae.RunInfo) -> list[str]:
    return [e.contents()["name"] for e in store.events(run.channel_id) if e.kind == "step.result"]


def test_a_step_paused_under_a_worker_runs_once_and_its_usage_counts_once(
    durable_url: str, tmp_path: Path
) -> None:
    with actae.open(durable_url) as store:
        run = store.start_run("paused-mid-step", agent_id="pausable", state={})
        process = worker(durable_url, tmp_path)
        try:
            wait_for((tmp_path / "entered").exists, "the worker to enter the step", within=TIMEOUT)
            store.pause(run.run_id, actor="ops", reason="look at it")
            (tmp_path / "release").write_text("go")
            wait_for(lambda: step_names(store, run) == ["sample"], "the step's result")
            assert store.run(run.run_id).status is actae.RunStatus.PAUSED
            store.unpause(run.run_id, actor="ops", reason="fine")
            wait_for(
                lambda: store.run(run.run_id).status is actae.RunStatus.COMPLETED,
                "the worker to finish the run",
                within=TIMEOUT,
            )
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(TIMEOUT)

        done = store.run(run.run_id)
        assert done.result == {"answer": {"text": "a sampled answer"}, "after": "done"}
        assert (tmp_path / "calls").read_text().split() == ["sample", "after"]
        assert step_names(store, run) == ["sample", "after"]
        assert done.usage == USAGE
        projector = store.projector()
        projector.catch_up()
        rows = projector.query("SELECT run_id, steps_done, cost, input_tokens FROM run_status")
        (row,) = [r for r in rows if str(r["run_id"]) == str(run.run_id)]
        assert (row["steps_done"], row["cost"], row["input_tokens"]) == (2, 0.02, 700.0)
