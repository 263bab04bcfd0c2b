"""The operator's audited actions: the verbs the CLI and the console share, and what each calls."""

from __future__ import annotations

from collections.abc import Callable

from actae.adapters.runtime.store import Store
from actae.domain.values import RunInfo

RUN_ACTIONS: dict[str, Callable[..., RunInfo]] = {
    "cancel": Store.cancel,
    "pause": Store.pause,
    "unpause": Store.unpause,
    "retry": Store.retry_run,
    "forget": Store.forget,
    "hold": Store.hold,
    "release": Store.release,
}
"""Actions on a run: ``(store, run_id, actor=, reason=)``."""
DECISIONS: dict[str, Callable[..., RunInfo]] = {"approve": Store.approve, "deny": Store.deny}
"""Answers to a run's approval: ``(store, run_id, name, actor=, note=)``."""
OUTCOMES = ("completed", "failed")
"""What an operator can say an effect in doubt (or needing review) did (``store.override``)."""
