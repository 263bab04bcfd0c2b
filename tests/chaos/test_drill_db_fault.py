"""``actae drill --db-fault``: the drill takes the PostgreSQL server down among its kills."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from actae.adapters.drill.outages import plan

DRILL = [sys.executable, "-m", "actae.adapters.cli", "drill", "--json"]


# Seeds whose plans take the server down at all three moments between them.
@pytest.mark.parametrize(("fault", "seed"), [("restart", 3), ("crash", 1)])
def test_the_drill_holds_every_invariant_through_database_outages(
    chaos_url: str, fault: str, seed: int
) -> None:
    result = subprocess.run(
        [*DRILL, "--db", chaos_url, "--db-fault", fault, "--seed", str(seed)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    report: dict[str, Any] = json.loads(result.stdout)

    assert report["summary"]["all_ok"] is True
    (run,) = report["runs"]
    assert [o["moment"] for o in run["db_outages"]] == list(plan(seed, 0))
    assert report["summary"]["db_outages"] == run["db_outage_count"] == 2
    for outage in run["db_outages"]:
        assert outage["fault"] == fault
        assert outage["outage_seconds"] > 0
        assert 0 <= outage["recovery_seconds"] <= 60
    assert (run["duplicate_charges"], run["model_calls_rerun"]) == (0, 0)
    assert run["lost_or_reordered_events"] == 0
    print(json.dumps(report["summary"]))
