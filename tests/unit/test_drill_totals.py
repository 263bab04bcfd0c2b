"""The drill's many-run column sums counts, but tallies what describes a run."""

from __future__ import annotations

from typing import Any

from actae.adapters.drill.report import ROWS, _totals


def a_run(**figures: Any) -> dict[str, Any]:
    base: dict[str, Any] = {key: 0 for key, _ in ROWS}
    return {**base, "status": "completed", "recovery_seconds": 1.0, **figures}


def test_descriptions_are_tallied_and_counts_summed() -> None:
    runs = [
        a_run(killed_after_transition=3, schema_migrated_to=2, model_calls=4),
        a_run(killed_after_transition=3, schema_migrated_to=2, model_calls=4),
        a_run(killed_after_transition=5, schema_migrated_to=2, model_calls=5),
    ]

    totals = _totals(runs)

    assert totals["killed_after_transition"] == "3 x2, 5 x1"
    assert totals["schema_migrated_to"] == "2 x3"
    assert totals["status"] == "completed x3"
    assert totals["model_calls"] == 13
