"""A worker behind a black hole: its late provider call is never repeated by a takeover.

Issue 28, item 2. Worker 1 is cut off from PostgreSQL (a proxy that stops forwarding
without a reset) inside its provider call, with a 1 s effect lease and a 10 s deadline
(the issue's 6 s lease and 20 s call, scaled down). Its lease runs out at once; worker 2,
connected directly, takes the run over. Before worker 1's call lands, worker 2 must not
reconcile nor charge: it waits for the attempt's deadline, then reconciles, finds worker
1's charge, and completes the run with it. The provider executes the charge once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import actae
from tests.helpers import wait_for
from tests.integration.provider import MockProvider
from tests.integration.wire_proxy import WireProxy

pytestmark = pytest.mark.postgres

HERE = Path(__file__).parent
WITHIN = 60.0
EFFECT_LEASE = 1.0
TIMEOUT = 10.0
REFUSED = "may still be running until its deadline"


def worker(url: str, name: str, env: dict[str, str]) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "actae.adapters.cli.main", "worker", "--db", url,
               "--import", str(HERE / "partition_workflows.py"), "--name", name,
               "--lease", "1", "--poll-interval", "0.05"]  # fmt: skip
    return subprocess.Popen(command, env={**os.environ, **env}, stderr=subprocess.PIPE, text=True)


def calls(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_a_takeover_waits_for_the_cut_off_attempts_deadline(
    chaos_cluster: Any, chaos_url: str, tmp_path: Path
) -> None:
    log, land, go = tmp_path / "calls.jsonl", tmp_path / "land", tmp_path / "go"
    provider = MockProvider(tmp_path / "provider.db")
    env = {"PARTITION_CALL_LOG": str(log), "PARTITION_LAND": str(land), "PARTITION_GO": str(go),
           "PARTITION_PROVIDER": str(provider.path), "PARTITION_TIMEOUT": str(TIMEOUT),
           "PARTITION_EFFECT_LEASE": str(EFFECT_LEASE)}  # fmt: skip
    with WireProxy(("127.0.0.1", chaos_cluster.port)) as proxy, actae.open(chaos_url) as store:
        run = store.start_run("pay", agent_id="partitioned", state={})
        first = worker(proxy.url(chaos_url), "w1", env)
        second = None
        try:
            wait_for(lambda: any(c["call"] == "waiting for go" for c in calls(log)), "w1's run")
            second = worker(chaos_url, "w2", env)  # w1 holds the run's lease meanwhile
            said = lines_of(second)
            wait_for(lambda: any("working on" in line for line in said), "w2 to be up")
            go.touch()  # w1 claims the effect now; w2 is polling, w1 holds the run's lease
            wait_for(lambda: any(c["call"] == "calling" for c in calls(log)), "w1's call")
            proxy.stall()  # w1 is cut off inside its provider call: no RST, no answer
            wait_for(
                lambda: any(REFUSED in line for line in said) or called_by(log, "w2"),
                "w2 to try the effect",
                within=WITHIN,
            )
            land.touch()  # w1's call lands now, before its deadline
            wait_for(lambda: charged_by(log, "w1"), "w1's charge")
            wait_for(
                lambda: store.run(run.run_id).status is actae.RunStatus.COMPLETED,
                "w2 to finish the run",
                within=WITHIN,
            )
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait(WITHIN)
            if second is not None:
                second.send_signal(signal.SIGTERM)
                second.wait(WITHIN)

        key = f"{run.run_id}:effect:charge:1"
        effect = store.effect(key)
        done = store.run(run.run_id)

    assert (provider.requests(), provider.charges()) == (1, 1), calls(log)  # executed once
    assert any(REFUSED in line for line in said)  # w2 tried before the deadline, and waited
    assert [c["worker"] for c in calls(log) if c["call"] == "calling"] == ["w1"]
    assert [c["worker"] for c in calls(log) if c["call"] == "waiting for go"] == ["w1"]
    assert done.result is not None
    assert done.result["charge"]["token"] == 1  # w2 reconciled: w1's charge, not its own
    first_attempt, takeover = effect.attempts
    assert first_attempt.deadline == first_attempt.claimed_at + timedelta(seconds=TIMEOUT)
    assert takeover.claimed_at >= first_attempt.deadline  # on the store's clock


def called_by(log: Path, name: str) -> bool:
    """Whether worker ``name`` called the provider."""
    return any(c["call"] == "calling" and c["worker"] == name for c in calls(log))


def charged_by(log: Path, name: str) -> bool:
    """Whether the provider charged worker ``name``'s call."""
    return any(c["call"] == "charged" and c["worker"] == name for c in calls(log))


def lines_of(process: subprocess.Popen[str]) -> list[str]:
    """The lines ``process`` writes to its stderr, collected as they come (by a thread)."""
    said: list[str] = []

    def collect() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            said.append(line)

    threading.Thread(target=collect, daemon=True).start()
    return said
