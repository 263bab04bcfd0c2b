"""Unit: a run's standing (status and next action) from its facts, the most pressing first.

The one rule every reader applies (``actae.domain.status``): run_status stores it, the
operator's views show it, and a worker chooses its runs by it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from actae.domain.effects import EffectStatus as E
from actae.domain.status import RunFacts, Standing, run_status, standing, worth_a_turn
from actae.domain.values import RunStatus as S

NOW = datetime(2026, 1, 1, tzinfo=UTC)
EVERY_ASK = {E.NEEDS_REVIEW: "card", E.IN_DOUBT: "charge", E.RETRY_SCHEDULED: "mail"}


@pytest.mark.parametrize(
    ("facts", "expected"),
    [
        (RunFacts(), (S.RUNNING, "continue")),
        (RunFacts(effects=EVERY_ASK), (S.BLOCKED, "review effect card")),
        (
            RunFacts(effects={E.IN_DOUBT: "charge", E.RETRY_SCHEDULED: "mail"}),
            (S.RETRYING, "reconcile effect charge"),
        ),
        (RunFacts(effects={E.IN_DOUBT: "charge"}), (S.RUNNING, "reconcile effect charge")),
        (RunFacts(effects={E.RETRY_SCHEDULED: "mail"}), (S.RETRYING, "retry effect mail")),
        (
            RunFacts(unserved=True, agent_id="sender", effects={E.RETRY_SCHEDULED: "mail"}),
            (S.RETRYING, "retry effect mail"),
        ),
        (RunFacts(unserved=True, agent_id="sender"), (S.RUNNING, "register workflow 'sender'")),
        (
            RunFacts(regressed="channel c: saw cursor 9", effects=EVERY_ASK),
            (S.BLOCKED, "history regressed: channel c: saw cursor 9"),
        ),
        (
            RunFacts(lifecycle=S.WAITING, waiting_reason="approval", waiting_name="refund"),
            (S.WAITING, "wait for approval refund"),
        ),
        (
            RunFacts(lifecycle=S.WAITING, waiting_name="refund", escalated=True),
            (S.WAITING, "escalated: refund"),
        ),
        (RunFacts(lifecycle=S.PAUSED, effects=EVERY_ASK), (S.PAUSED, "unpause")),
        (
            RunFacts(lifecycle=S.FAILED, error="ValueError: no"),
            (S.FAILED, "fix and retry: ValueError: no"),
        ),
        (
            RunFacts(lifecycle=S.FAILED),
            (S.FAILED, "fix and retry: see the run's Run.Failed event"),
        ),
        (RunFacts(lifecycle=S.FAILED, error=""), (S.FAILED, "fix and retry: ")),
        (RunFacts(lifecycle=S.COMPLETED, unserved=True), (S.COMPLETED, "none")),
        (RunFacts(lifecycle=S.CANCELLED, effects=EVERY_ASK), (S.CANCELLED, "none")),
        (
            RunFacts(forgotten=True, regressed="lost", lifecycle=S.FAILED, error="x"),
            (S.FORGOTTEN, "none"),
        ),
    ],
)
def test_a_runs_standing_is_its_most_pressing_fact(
    facts: RunFacts, expected: tuple[S, str]
) -> None:
    assert standing(facts) == Standing(*expected)


def test_only_a_running_run_is_held_back_by_its_effects() -> None:
    held = {E.NEEDS_REVIEW, E.RETRY_SCHEDULED}

    assert run_status(S.RUNNING, effects=held) is S.BLOCKED
    assert run_status(S.RUNNING, effects={E.RETRY_SCHEDULED, E.IN_DOUBT}) is S.RETRYING
    assert run_status(S.RUNNING, effects={E.IN_DOUBT, E.CLAIMED, E.PENDING}) is S.RUNNING
    assert run_status(S.WAITING, effects=held) is S.WAITING
    assert run_status(S.PAUSED, forgotten=True, effects=held) is S.FORGOTTEN


@pytest.mark.parametrize(
    ("status", "wake_in", "retry_in", "worth"),
    [
        (S.RUNNING, None, None, True),
        (S.WAITING, 0, None, True),  # due at its moment, not a moment later
        (S.WAITING, 1, None, False),
        (S.WAITING, None, None, False),  # waits for a person: no moment falls due
        (S.RETRYING, None, -1, True),
        (S.RETRYING, None, 1, False),
        (S.BLOCKED, -1, -1, False),
        (S.PAUSED, -1, -1, False),
        (S.COMPLETED, None, None, False),
        (S.FORGOTTEN, None, None, False),
    ],
)
def test_a_turn_is_worth_taking_when_the_standing_lets_the_run_move_now(
    status: S, wake_in: float | None, retry_in: float | None, worth: bool
) -> None:
    def at(seconds: float | None) -> datetime | None:
        return None if seconds is None else NOW + timedelta(seconds=seconds)

    assert worth_a_turn(status, wake_at=at(wake_in), retry_at=at(retry_in), now=NOW) is worth
