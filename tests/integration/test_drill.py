"""The failure drill end to end, with real processes, for every kill point of the run."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

DRILL = [sys.executable, "-m", "actae.adapters.cli", "drill", "--json"]


def drill(*args: str) -> dict[str, Any]:
    result = subprocess.run(
        [*DRILL, *args], capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    return report


@pytest.mark.parametrize("kill_after", [1, 2, 3, 4, 5, 6])
def test_every_kill_point_keeps_every_invariant(kill_after: int) -> None:
    report = drill("--kill-after", str(kill_after), "--seed", str(1000 + kill_after))

    (run,) = report["runs"]
    assert run["ok"] is True
    assert run["status"] == "completed"
    assert (run["duplicate_charges"], run["lost_or_reordered_events"]) == (0, 0)
    assert (run["model_calls_rerun"], run["manual_steps"]) == (0, 0)
    assert run["duplicate_deliveries_absorbed"] == run["duplicate_deliveries_seen"] == 2
    assert run["http_429_honoured"] == run["http_429_received"] == 2
    assert run["recovery_seconds"] <= 60


@pytest.mark.postgres
def test_the_drill_on_postgres(pg_url: str) -> None:
    report = drill("--db", pg_url, "--runs", "2")

    assert report["summary"]["all_ok"] is True
    assert report["summary"]["recovered_within_60s"] == 1.0


def test_bad_drill_options_are_refused() -> None:
    result = subprocess.run(
        [*DRILL, "--kill-after", "7"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 2
    assert "kill_after" in result.stderr


@pytest.mark.parametrize(
    "point", ["after-model-call", "during-commit", "after-charge-accepted", "while-waiting"]
)
def test_every_crash_point_of_the_seed_keeps_every_invariant(point: str) -> None:
    report = drill("--crash-point", point, "--seed", "77")

    (run,) = report["runs"]
    assert run["ok"] is True, run
    assert (run["duplicate_charges"], run["model_calls_rerun"]) == (0, 0)
    assert run["lost_or_reordered_events"] == 0


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kill_after=st.integers(1, 6), seed=st.integers(0, 2**16), agents=st.integers(3, 6))
def test_hypothesis_chosen_kill_points_keep_every_invariant(
    kill_after: int, seed: int, agents: int
) -> None:
    report = drill("--kill-after", str(kill_after), "--seed", str(seed), "--agents", str(agents))

    assert report["summary"]["all_ok"] is True, report
