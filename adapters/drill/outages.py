"""Database outages in the drill (``actae drill --db-fault``): when, and what it cost.

Each is journalled once the server is back; the report measures recovery from then.
"""

from __future__ import annotations

import random
from datetime import datetime
from typing import Any

from actae.domain.values import ChannelEvent

MOMENTS = ("before-kill", "after-kill", "during-takeover")
JOURNAL_KIND = "drill.db_fault"


def plan(seed: int, index: int) -> tuple[str, ...]:
    """The moments of run ``index``'s outages: one or two, by the seed.

    The first is before the takeover has gone on: every run has one the workers ride out.
    """
    rng = random.Random(f"{seed}:{index}")  # noqa: S311 - a drill schedule, not crypto
    first = rng.choice(MOMENTS[:2])
    chosen = {first}
    if rng.random() < 0.5:
        chosen.add(rng.choice([m for m in MOMENTS if m != first]))
    return tuple(m for m in MOMENTS if m in chosen)


def outage_figures(
    journal: list[ChannelEvent], recovery: Any, workflow: str
) -> list[dict[str, Any]]:
    """Each journalled outage of ``workflow`` with its recovery (``recovery(back)`` seconds)."""
    return [
        {
            "moment": e.contents()["moment"],
            "fault": e.contents()["fault"],
            "outage_seconds": e.contents()["seconds"],
            "recovery_seconds": recovery(datetime.fromisoformat(e.contents()["ended"])),
        }
        for e in journal
        if e.kind == JOURNAL_KIND and e.contents().get("workflow") == workflow
    ]
