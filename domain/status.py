"""A run's standing: the status it shows and the next action it asks for, decided once.

The projector applies :func:`standing` to its tables' facts, workers pick runs by
:func:`worth_a_turn`, the reader applies :func:`run_status` to a run's events.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple

from actae.domain.effects import EffectStatus
from actae.domain.values import RunStatus

RUN_HELD_BACK: tuple[tuple[EffectStatus, RunStatus], ...] = (
    (EffectStatus.NEEDS_REVIEW, RunStatus.BLOCKED),
    (EffectStatus.RETRY_SCHEDULED, RunStatus.RETRYING),
)
"""Open effects' statuses that hold a running run back, the most pressing first."""
RUNNING_STATUSES = frozenset({RunStatus.RUNNING, *(run for _, run in RUN_HELD_BACK)})
"""The statuses a running run shows: its own, or what its effects make it."""

EFFECT_ACTIONS: tuple[tuple[EffectStatus, str], ...] = (
    (EffectStatus.NEEDS_REVIEW, "review"),
    (EffectStatus.IN_DOUBT, "reconcile"),
    (EffectStatus.RETRY_SCHEDULED, "retry"),
)
"""What a running run's open effects ask for, the most pressing first."""
NO_ACTION = "none"
"""The next action of a run that nothing more is to be done for (ended, or forgotten)."""
CONTINUE = "continue"
"""The next action of a running run that nothing holds back: a worker takes it on."""
NO_ERROR = "see the run's Run.Failed event"
"""What a failed run's next action points to when its error is not readable (sealed)."""


def run_status(
    lifecycle: RunStatus, *, forgotten: bool = False, effects: Collection[EffectStatus] = ()
) -> RunStatus:
    """The status a run shows: forgotten, its lifecycle, or what its open ``effects`` make it."""
    if forgotten:
        return RunStatus.FORGOTTEN
    if lifecycle is not RunStatus.RUNNING:
        return lifecycle
    return next((run for effect, run in RUN_HELD_BACK if effect in effects), RunStatus.RUNNING)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFacts:
    """What a run's standing is decided from: its own facts and those around it.

    ``effects``: the first open effect key in each status of :data:`EFFECT_ACTIONS`; ``unserved``:
    no live worker has its workflow; ``regressed``: how far its channel went back.
    """

    lifecycle: RunStatus = RunStatus.RUNNING
    forgotten: bool = False
    waiting_reason: str | None = None
    waiting_name: str | None = None
    escalated: bool = False
    error: str | None = None
    agent_id: str | None = None
    unserved: bool = False
    regressed: str | None = None
    effects: Mapping[EffectStatus, str] = field(default_factory=dict)


class Standing(NamedTuple):
    """Where a run stands (its status) and what should happen next (its next action)."""

    status: RunStatus
    next_action: str


def standing(facts: RunFacts) -> Standing:
    """The status and the next action of a run with these ``facts``."""
    status = run_status(facts.lifecycle, forgotten=facts.forgotten, effects=facts.effects.keys())
    return Standing(status, next_action(facts))


def next_action(facts: RunFacts) -> str:
    """What should happen next to a run with these ``facts`` (a regressed history first)."""
    if facts.forgotten:
        return NO_ACTION
    if facts.regressed is not None:
        return f"history regressed: {facts.regressed}"
    if facts.lifecycle is not RunStatus.RUNNING:
        return _lifecycle_action(facts)
    for status, verb in EFFECT_ACTIONS:
        key = facts.effects.get(status)
        if key is not None:
            return f"{verb} effect {key}"
    if facts.unserved:
        return f"register workflow '{facts.agent_id}'"
    return CONTINUE


def _lifecycle_action(facts: RunFacts) -> str:
    """What a run that is not running asks for: its wait, an unpause, a fix, or nothing."""
    lifecycle = facts.lifecycle
    if lifecycle is RunStatus.WAITING:
        if facts.escalated:
            return f"escalated: {facts.waiting_name}"
        return f"wait for {facts.waiting_reason} {facts.waiting_name}"
    if lifecycle is RunStatus.PAUSED:
        return "unpause"
    if lifecycle is RunStatus.FAILED:
        return f"fix and retry: {NO_ERROR if facts.error is None else facts.error}"
    return NO_ACTION


def worth_a_turn(
    status: RunStatus, *, wake_at: datetime | None, retry_at: datetime | None, now: datetime
) -> bool:
    """Whether a worker's turn could move a run of ``status`` at ``now`` (waits, retries due)."""
    if status is RunStatus.RUNNING:
        return True
    if status is RunStatus.WAITING:
        return _due(wake_at, now)
    if status is RunStatus.RETRYING:
        return _due(retry_at, now)
    return False


def _due(at: datetime | None, now: datetime) -> bool:
    """Whether a moment has come (a wait or a retry with no moment never falls due)."""
    return at is not None and at <= now
