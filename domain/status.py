"""A run's standing: the status it shows and the next action it asks for, decided once.

Everyone who looks at a run asks the same two questions, where does it stand and what
should happen next: the ``run_status`` read model stores the answer (the projector applies
:func:`standing` to the facts its tables hold of each run), the operator's views show it, a
worker reads it to choose the runs a turn could move (:func:`worth_a_turn`), and the store's
reader applies :func:`run_status` to a run's own events. So the rule lives here only; the
adapters gather the facts and apply it.

A run's *lifecycle* is its own status (``Run.status``: running, waiting, paused, or how it
ended). Its *status* is that lifecycle, except that a forgotten run says so and a running
run is held back by its open effects (:data:`RUN_HELD_BACK`). Its *next action* is the most
pressing thing someone (or something) should do about it (:func:`next_action`).
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
"""The open effects' statuses that hold a running run back, the most pressing first.

An effect needing review blocks the run: nothing moves until a person looks. One waiting for
its scheduled retry makes the run ``retrying``: it will move on by itself, so a review, when
there is one, is what the run's status must say. Any other open effect (pending, claimed, in
doubt) leaves the run ``running``.
"""
RUNNING_STATUSES = frozenset({RunStatus.RUNNING, *(run for _, run in RUN_HELD_BACK)})
"""The statuses a running run shows: its own, or what its effects make it."""

EFFECT_ACTIONS: tuple[tuple[EffectStatus, str], ...] = (
    (EffectStatus.NEEDS_REVIEW, "review"),
    (EffectStatus.IN_DOUBT, "reconcile"),
    (EffectStatus.RETRY_SCHEDULED, "retry"),
)
"""What a running run's open effects ask for, the most pressing first.

A review stops everything, so it comes first; an effect in doubt may have happened, and
nobody may run it again before someone reconciles it; a scheduled retry happens by itself
and is named last among them.
"""
NO_ACTION = "none"
"""The next action of a run that nothing more is to be done for (ended, or forgotten)."""
CONTINUE = "continue"
"""The next action of a running run that nothing holds back: a worker takes it on."""
NO_ERROR = "see the run's Run.Failed event"
"""What a failed run's next action points to when its error is not readable (sealed)."""


def held_back_status(statuses: Collection[EffectStatus]) -> RunStatus | None:
    """The status a running run takes from its open effects' ``statuses``, if any holds it.

    ``None``: no open effect holds the run back, it stays running (see :data:`RUN_HELD_BACK`).
    """
    return next((run for effect, run in RUN_HELD_BACK if effect in statuses), None)


def run_status(
    lifecycle: RunStatus, *, forgotten: bool = False, effects: Collection[EffectStatus] = ()
) -> RunStatus:
    """The status a run shows: forgotten, its lifecycle, or what its open ``effects`` make it."""
    if forgotten:
        return RunStatus.FORGOTTEN
    if lifecycle is not RunStatus.RUNNING:
        return lifecycle
    held = held_back_status(effects)
    return RunStatus.RUNNING if held is None else held


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFacts:
    """What a run's standing is decided from: its own facts and those around it.

    ``effects`` holds, for each effect status that asks for something
    (:data:`EFFECT_ACTIONS`), the first key (in key order) of the run's open effects in that
    status. In doubt there means a claim that may have happened unanswered (its lease ran
    out, or it was granted over an unanswered one); a retried step's attempt counter never
    is (a step is made again, never reconciled). The other facts come from outside the
    run's events: ``unserved`` (a running run no live worker has a workflow for) and
    ``regressed`` (how far the run's channel went back behind what a process saw).
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
    """What should happen next to a run with these ``facts``, the most pressing first.

    Nothing for a forgotten run. Then a regressed history, before anything the run might
    wait for: its channel lost events a process saw, and an operator must look
    (docs/outages.md). Then what its lifecycle asks (the wait it is in, an unpause, a fix
    and a retry), nothing for a run that ended, and for a running run what its effects ask
    (:data:`EFFECT_ACTIONS`), a workflow to register if no live worker serves it, or to
    continue.
    """
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
    """Whether a worker's turn with a run of ``status`` could move it at ``now``.

    A running run moves at once. A waiting one once its wait is due (``wake_at``: a timer
    fires, an unanswered wait expires), a retrying one once its retry is (``retry_at``,
    the earliest scheduled). A blocked one waits for a person's review, a paused one for an
    unpause: an event, which changes its status. An ended or forgotten run never moves.
    """
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
