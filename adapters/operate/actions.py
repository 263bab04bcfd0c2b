"""The operator's actions, each one of the store's audited commands (an event, never an edit).

The CLI and the console name the same verbs and reach the store through this one table.
"""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

from actae.adapters.runtime.store import Store
from actae.domain.values import RunInfo

RunAction = Callable[..., RunInfo]

RUN_ACTIONS: dict[str, RunAction] = {
    "cancel": Store.cancel,
    "pause": Store.pause,
    "unpause": Store.unpause,
    "retry": Store.retry_run,
    "forget": Store.forget,
    "hold": Store.hold,
    "release": Store.release,
}
"""Actions on a run that take an actor and a reason."""

DECISIONS: dict[str, RunAction] = {"approve": Store.approve, "deny": Store.deny}
"""Answers to a run's approval ``name``, with an actor and an optional note."""

OUTCOMES = ("completed", "failed")
"""What an operator can say an effect in doubt (or needing review) did (``store.override``)."""


def act(store: Store, verb: str, run_id: UUID, *, actor: str, reason: str) -> RunInfo:
    """Cancel, pause, unpause, retry, forget, hold or release the run, as ``actor``."""
    return RUN_ACTIONS[verb](store, run_id, actor=actor, reason=reason)


def decide(
    store: Store, verb: str, run_id: UUID, name: str, *, actor: str, note: str | None
) -> RunInfo:
    """Approve or deny the run's approval ``name``, as ``actor``."""
    return DECISIONS[verb](store, run_id, name, actor=actor, note=note)
