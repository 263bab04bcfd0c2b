"""Log lines of ``actae worker``: one JSON object per line with ``--log-format json``; text
lines that lead with the message and carry the time, level, logger, worker and run."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import actae
from tests.integration.lines import Lines

ACTAE = [sys.executable, "-m", "actae.adapters.cli"]
DEADLINE = 60.0
WORKFLOWS = """
import actae


@actae.workflow("greeter")
def greet(ctx):
    return {"hello": "world"}
"""
TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"


def runs(tmp_path: Path) -> tuple[str, Path, actae.RunInfo, actae.RunInfo]:
    """A store with a run the worker serves and one it cannot; the workflow file."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    workflows = tmp_path / "greeter.py"
    workflows.write_text(WORKFLOWS)
    with actae.open(url) as store:
        served = store.start_run("greet", agent_id="greeter", state={})
        unserved = store.start_run("orphan", agent_id="nobody", state={})
    return url, workflows, served, unserved


def test_a_worker_logs_one_json_object_per_line(tmp_path: Path) -> None:
    url, workflows, served, unserved = runs(tmp_path)
    done = f"run {served.run_id}: completed"
    orphan = f"run {unserved.run_id}: no live worker"
    process = subprocess.Popen(
        [
            *ACTAE,
            "worker",
            "--db",
            url,
            "--import",
            str(workflows),
            "--name",
            "w-json",
            "--poll-interval",
            "0.05",
            "--log-format",
            "json",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    said: list[str] = []
    try:
        assert process.stderr is not None
        lines = Lines(process.stderr)
        deadline = time.monotonic() + DEADLINE
        while not (any(done in s for s in said) and any(orphan in s for s in said)):
            line = lines.next(max(deadline - time.monotonic(), 0.01))
            assert line, f"the worker exited early: {said}"
            said.append(line)
        process.send_signal(signal.SIGTERM)
        assert process.wait(DEADLINE) == 0
        said.extend(lines.rest(DEADLINE).splitlines())
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()

    entries: list[dict[str, Any]] = [json.loads(line) for line in said]
    for entry in entries:
        assert {"time", "level", "logger", "message", "worker"} <= entry.keys(), entry
        assert re.fullmatch(TIME, entry["time"]), entry
        assert datetime.fromisoformat(entry["time"]).tzinfo is not None
        assert entry["worker"] == "w-json"
    assert entries[0]["message"].startswith("working on "), entries[0]
    (completed,) = [e for e in entries if e["message"] == done]
    assert (completed["level"], completed["logger"]) == ("INFO", "actae.worker")
    assert completed["run_id"] == str(served.run_id)
    (unserved_line,) = [e for e in entries if e["message"].startswith(orphan)]
    assert (unserved_line["level"], unserved_line["run_id"]) == ("WARNING", str(unserved.run_id))


def test_a_worker_text_line_leads_with_its_message_then_when_how_bad_who_and_which_run(
    tmp_path: Path,
) -> None:
    url, workflows, served, _ = runs(tmp_path)

    result = subprocess.run(
        [*ACTAE, "worker", "--db", url, "--import", str(workflows), "--name", "w-text", "--once"],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    (line,) = [
        ln for ln in result.stderr.splitlines() if str(served.run_id) in ln and "completed" in ln
    ]
    pattern = (
        rf"run {served.run_id}: completed  \[{TIME} INFO actae\.worker "
        rf"worker=w-text run_id={served.run_id}\]"
    )
    assert re.fullmatch(pattern, line), line
