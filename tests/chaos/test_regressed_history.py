"""A worker process on a throwaway cluster meets a history that lost rows (issue 28, item 1).

Rows of a run's channel are deleted behind the store's back, as a failover to an
asynchronous standby that was behind loses the newest commits, while a real worker process
is inside a step. The worker's next write is refused by the database (its previous cursor
is gone), the worker finds the channel behind the cursor it wrote, and it stops: it exits
with the one-line error, and run_status says ``history regressed: ...`` for the run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import actae
from tests.helpers import wait_for
from tests.history_loss import lose_events_after

pytestmark = pytest.mark.postgres

DEADLINE = 30.0
ACTAE = [sys.executable, "-m", "actae.adapters.cli"]
WORKFLOWS = Path(__file__).with_name("regression_workflows.py")


def test_a_worker_stops_on_rows_lost_behind_the_store(chaos_url: str, tmp_path: Path) -> None:
    with actae.open(chaos_url) as store:
        run = store.start_run("lossy", agent_id="regress", state={})
        log = tmp_path / "worker.log"
        worker = subprocess.Popen(
            [*ACTAE, "worker", "--import", str(WORKFLOWS), "--db", chaos_url, "--name", "w1"],
            env={**os.environ, "REGRESS_DIR": str(tmp_path)},
            stderr=log.open("w"),
            text=True,
        )
        try:
            wait_for((tmp_path / "started").exists, "step b to start", DEADLINE)
            assert lose_events_after(store, chaos_url, run.channel_id, 1) >= 1  # step a's row
            (tmp_path / "lost").touch()
            status = worker.wait(DEADLINE)
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait(DEADLINE)
        said = log.read_text(errors="replace")
        assert status == 2, said
        assert "history regressed" in said, said
        assert "actae: error: channel" in said.splitlines()[-1], said
        rows = store.projector().query("SELECT run_id, next_action FROM run_status")
        (action,) = [row["next_action"] for row in rows if str(row["run_id"]) == str(run.run_id)]
        assert action.startswith("history regressed: "), action
        events = store._service.recorder.select_events(run.channel_id)
        assert [event.originator_version for event in events] == [1]
