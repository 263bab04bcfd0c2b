"""The failure drill end to end, with real processes, for every kill point of the run."""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actae.adapters.drill.report import Report
from actae.adapters.drill.run import Drill
from actae.adapters.drill.run import drill as run_drill
from actae.adapters.drill.workflows import PINS_V1
from tests.helpers import ACTAE, actae_cli

DRILL = [*ACTAE, "drill", "--json"]


def drill(*args: str) -> dict[str, Any]:
    result = subprocess.run(
        [*DRILL, *args], capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    return report


@pytest.mark.parametrize(
    ("kill_after", "duplicates"), [(1, 0), (2, 2), (3, 1), (4, 2), (5, 4), (6, 2)]
)
def test_every_kill_point_keeps_every_invariant(kill_after: int, duplicates: int) -> None:
    """Each kill point, with 0, 1, 2 (the CLI's default) and 4 repeated start messages: the
    delivery figures count the deliveries recorded, and every one is absorbed."""
    code, report = drill_in_process(
        kill_after=kill_after, seed=1000 + kill_after, duplicate_deliveries=duplicates
    )

    (run,) = report["runs"]
    assert run["ok"] is True
    assert code == 0
    assert run["status"] == "completed"
    assert (run["duplicate_charges"], run["lost_or_reordered_events"]) == (0, 0)
    assert run["idempotent_replays"] == 0  # a charge in doubt is reconciled, not re-POSTed
    assert (run["model_calls_rerun"], run["manual_steps"]) == (0, 0)
    assert run["duplicate_deliveries_absorbed"] == run["duplicate_deliveries_seen"] == duplicates
    assert run["http_429_honoured"] == run["http_429_received"] == 2
    assert run["recovery_seconds"] <= 60


@pytest.mark.postgres
def test_the_drill_on_postgres(pg_url: str) -> None:
    report = drill("--db", pg_url, "--runs", "2")

    assert report["summary"]["all_ok"] is True
    assert report["summary"]["recovered_within_60s"] == 1.0


def test_bad_drill_options_are_refused() -> None:
    result = actae_cli("drill", "--json", "--kill-after", "7")

    assert result.returncode == 2
    assert "Invalid value for '--kill-after': 7 is not in the range 1<=x<=6" in result.stderr


@pytest.mark.parametrize(
    ("db", "why"),
    [
        ([], "needs --db postgresql://"),
        (["--db", "memory://"], "memory has no server to restart"),
        (["--db", "sqlite:///drill.db"], "sqlite has no server to restart"),
        (["--db", "postgresql://postgres@db.example.com/x"], "a server on this machine"),
    ],
)
def test_a_database_fault_without_a_local_postgresql_server_is_refused(
    db: list[str], why: str, tmp_path: Path
) -> None:
    # The CLI's main in this process (tests/integration/test_cli_errors.py runs the real
    # command for the one-line, status-2 contract); the drill's refusal is what counts here.
    result = actae_cli("drill", "--json", *db, "--db-fault", "restart", cwd=tmp_path)

    assert result.returncode == 2
    assert result.stderr.startswith("actae: error: invalid db_fault: ")
    assert why in result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert result.stdout == ""
    assert list(tmp_path.iterdir()) == []  # nothing created, not even the SQLite file


@pytest.mark.parametrize(
    ("point", "through_the_command"),
    [
        pytest.param("after-model-call", False, id="after-model-call"),
        pytest.param("during-commit", False, id="during-commit"),
        pytest.param("after-charge-accepted", False, id="after-charge-accepted"),
        # The real command once: its --crash-point reaches the drill.
        pytest.param("while-waiting", True, id="while-waiting"),
    ],
)
def test_every_crash_point_of_the_seed_keeps_every_invariant(
    point: str, through_the_command: bool
) -> None:
    if through_the_command:
        report = drill("--crash-point", point, "--seed", "77")
    else:
        _, report = drill_in_process(crash_point=point, seed=77)

    (run,) = report["runs"]
    assert run["ok"] is True, run
    assert run["duplicate_deliveries_absorbed"] == run["duplicate_deliveries_seen"] == 2  # default
    assert (run["duplicate_charges"], run["model_calls_rerun"]) == (0, 0)
    assert (run["idempotent_replays"], run["lost_or_reordered_events"]) == (0, 0)


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kill_after=st.integers(1, 6), seed=st.integers(0, 2**16), agents=st.integers(3, 6))
def test_hypothesis_chosen_kill_points_keep_every_invariant(
    kill_after: int, seed: int, agents: int
) -> None:
    report = drill("--kill-after", str(kill_after), "--seed", str(seed), "--agents", str(agents))

    assert report["summary"]["all_ok"] is True, report


def drill_in_process(**options: Any) -> tuple[int, dict[str, Any]]:
    """The drill called as a function, for options the CLI does not offer (fault injection)."""
    out = io.StringIO()
    code = run_drill(as_json=True, out=out, **options)
    report: dict[str, Any] = json.loads(out.getvalue())
    return code, report


def test_a_second_execution_under_one_key_is_a_duplicate_charge() -> None:
    # The payer dies right after the charge; its successor POSTs again under the same key
    # instead of reconciling, and the provider executes it again.
    code, report = drill_in_process(
        crash_point="after-charge-accepted",
        seed=31,
        faults=("payer-retries-in-doubt", "provider-ignores-idempotency-keys"),
    )

    (run,) = report["runs"]
    assert (run["duplicate_charges"], run["idempotent_replays"]) == (1, 0)
    assert run["ok"] is False
    assert code == 1


def test_a_retry_answered_as_an_idempotent_replay_is_not_a_duplicate_charge() -> None:
    code, report = drill_in_process(
        crash_point="after-charge-accepted", seed=32, faults=("payer-retries-in-doubt",)
    )

    (run,) = report["runs"]
    assert (run["duplicate_charges"], run["idempotent_replays"]) == (0, 1)
    assert run["ok"] is True
    assert code == 0


def test_a_duplicate_delivery_that_starts_a_second_run_is_not_absorbed(tmp_path: Path) -> None:
    out = io.StringIO()
    environment = Drill(
        f"sqlite:///{tmp_path / 'drill.db'}", tmp_path, agents=3, seed=50, kill_after=1, out=out
    )
    try:
        assert environment.run_once(0)["duplicate_deliveries_absorbed"] == 2
        # A consumer that lost the message's operation id starts the workflow a second time.
        environment.note("queue.delivered", {"workflow": "drill-50-0"})
        environment.store.start_run(
            "drill-50-0", agent_id="drill-coordinator", state={}, pins=PINS_V1
        )
        operation = environment.store.operation("start:drill-50-0")
        assert operation is not None
        run = Report(environment, "drill-50-0", operation.result["run_id"]).figures()
    finally:
        environment.close()

    assert (run["duplicate_deliveries_seen"], run["duplicate_deliveries_absorbed"]) == (3, 2)
    assert run["ok"] is False


def test_a_worker_that_exits_unplanned_fails_the_drill(tmp_path: Path) -> None:
    environment = Drill(
        f"sqlite:///{tmp_path / 'drill.db'}",
        tmp_path,
        agents=3,
        seed=51,
        kill_after=1,
        out=io.StringIO(),
    )
    try:
        assert environment.run_once(0)["workers_exited_unplanned"] == 0
        # A worker the drill did not kill dies (as one would of a database outage).
        stray = environment._start_worker("drill-51-0-w9", schema=2)
        stray.kill()
        stray.wait()
        environment._notice_exits()
        environment._notice_exits()  # journalled once
        operation = environment.store.operation("start:drill-51-0")
        assert operation is not None
        run = Report(environment, "drill-51-0", operation.result["run_id"]).figures()
    finally:
        environment.close()

    assert run["workers_exited_unplanned"] == 1
    assert run["ok"] is False
