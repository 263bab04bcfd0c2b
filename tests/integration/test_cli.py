"""The ``actae`` command: the demo survives a real SIGKILL; inspection prints JSON."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import actae
from tests.helpers import ACTAE, actae_cli


def test_demo_recovers_without_resampling(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'demo.db'}"

    result = subprocess.run(
        [*ACTAE, "demo", "--db", url], check=False, capture_output=True, text=True, timeout=120
    )

    assert result.returncode == 0, result.stderr
    assert "exit status -9" in result.stdout
    assert "replayed from the log" in result.stdout
    assert "re-sampled after the crash: 0" in result.stdout
    with actae.open(url) as store:
        (line,) = [ln for ln in result.stdout.splitlines() if ln.startswith("1. started run")]
        run = store.run(line.split()[-1])
        kinds = [e.kind for e in store.events(run.channel_id)]
        assert kinds.count("model.call") == 4
        assert kinds.count("step.done") == 4
        assert len(store.lineage(run.run_id).descendants) == 1


def test_inspection_prints_json_and_errors_exit_2(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    with actae.open(url) as store:
        run = store.start_run("wf", agent_id="a", state={"n": 1})

    # The real command once; the CLI's main in this process for the rest (the same code,
    # without an interpreter's start-up each).
    events = subprocess.run(
        [*ACTAE, "events", "--db", url, str(run.channel_id)],
        capture_output=True,
        text=True,
        check=True,
    )
    state = actae_cli("state", "--db", url, str(run.channel_id), "--cursor", "1")
    missing = actae_cli("head", "--db", url, str(run.run_id))

    assert [e["kind"] for e in json.loads(events.stdout)] == ["run.started"]
    assert state.returncode == 0, state.stderr
    assert json.loads(state.stdout)["state"] == {"n": 1}
    assert missing.returncode == 2
    assert "not found" in missing.stderr
