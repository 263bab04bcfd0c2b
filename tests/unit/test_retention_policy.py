"""Retention's rule, on the Run aggregate alone: due exactly when the policy says.

A finished run is due once its end plus its policy's time has passed (at that moment, not
a second before); a held, live or purged run never is; an agent's policy replaces the
default, and a status a policy does not name is kept.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest

from actae.domain.errors import ValidationError
from actae.domain.retention import Retention, describe, require_duration, require_policy
from actae.domain.run import Run
from actae.domain.values import Pins

START = datetime(2026, 3, 1, tzinfo=UTC)
DAY = timedelta(days=1)


def run_of(agent: str, *, ends: str | None) -> Run:
    run = Run.start(
        run_id=uuid4(),
        workflow_id="wf",
        agent_id=agent,
        channel_id=uuid4(),
        pins=Pins(),
        deadline=None,
        parent_run_id=None,
        forked_from=None,
        operation_id=None,
        at=START,
    )
    if ends == "completed":
        run.complete({}, at=START)
    elif ends == "failed":
        run.fail("boom", actor="w", at=START)
    return run


def policies(**by_agent: dict[str, str] | None) -> Retention:
    kept = Retention.define(
        agent=None, keep=require_policy("p", {"completed": "7d"}), actor="ops", at=START
    )
    for agent, policy in by_agent.items():
        kept.change(agent=agent, keep=require_policy("p", policy), actor="ops", at=START)
    return kept


def test_due_at_the_moment_its_time_has_passed_and_not_before() -> None:
    run = run_of("a", ends="completed")
    kept = policies()
    assert kept.due(run, START + 7 * DAY - timedelta(microseconds=1)) is None
    assert kept.due(run, START + 7 * DAY) == "default: completed kept 7d"


def test_never_held_live_or_unnamed_statuses() -> None:
    kept = policies()
    assert kept.due(run_of("a", ends=None), START + 400 * DAY) is None
    assert kept.due(run_of("a", ends="failed"), START + 400 * DAY) is None  # not named
    held = run_of("a", ends="completed")
    held.hold(actor="legal", reason="case", at=START)
    assert kept.due(held, START + 400 * DAY) is None
    assert kept.due(held, START + 400 * DAY, ignoring_hold=True) is not None


def test_an_agents_policy_replaces_the_default() -> None:
    kept = policies(ledger=None, fast={"completed": "1h"})
    assert kept.due(run_of("ledger", ends="completed"), START + 400 * DAY) is None
    assert kept.due(run_of("fast", ends="completed"), START + timedelta(hours=1)) is not None
    assert kept.shortest() == 3600


@pytest.mark.parametrize(
    ("given", "seconds"),
    [("45s", 45), ("30m", 1800), ("12h", 43200), ("7d", 604800), ("2w", 1209600), (90, 90)],
)
def test_durations(given: object, seconds: float) -> None:
    assert require_duration("d", given) == seconds


@pytest.mark.parametrize("given", ["7", "soon", "-1d", 0, -5, True, None, "101y"])
def test_bad_durations_are_refused(given: object) -> None:
    with pytest.raises(ValidationError):
        require_duration("d", given)


def test_durations_read_back_in_their_unit() -> None:
    assert [describe(s) for s in (45, 1800, 604800, 365 * 86400, 1.5)] == [
        "45s",
        "30m",
        "7d",
        "1y",
        "1.5s",
    ]
