"""The step boundary: whether a run may go on, by what its row says now.

Workflow code checks before each call (``RunContext.checkpoint``): a run that waits
suspends its code, one that was paused, cancelled, ended or forgotten stops it, and one past
its deadline or over its budget is failed here, by the worker that found out.
"""

from __future__ import annotations

from actae.adapters.runtime.service import ActaeService
from actae.domain import lifecycle
from actae.domain.errors import RunStoppedError, RunSuspended
from actae.domain.status import RUNNING_STATUSES
from actae.domain.values import RunInfo, RunStatus

STOPPED = frozenset(RunStatus) - RUNNING_STATUSES - {RunStatus.WAITING}
"""Statuses at which workflow code stops at its next boundary: paused, ended, forgotten."""


def ensure_may_go_on(service: ActaeService, info: RunInfo, worker: str) -> None:
    """Raise ``RunSuspended`` or ``RunStoppedError`` unless the run may go on (failing if late)."""
    if info.status is RunStatus.WAITING:
        wait = info.waiting
        raise RunSuspended(
            info.run_id,
            reason=wait.reason if wait else "unknown",
            name=wait.name if wait else "",
            until=wait.until if wait else None,
        )
    if info.status in STOPPED:
        raise RunStoppedError(info.run_id, status=info.status.value)
    reason = _overdue(service, info)
    if reason is not None:
        service.call(lifecycle.fail_run, info.run_id, reason, actor=worker)
        raise RunStoppedError(info.run_id, status=RunStatus.FAILED.value)


def _overdue(service: ActaeService, info: RunInfo) -> str | None:
    """Why the run must fail now: its deadline passed, or it spent more than its budget."""
    if info.deadline is not None and service.now() >= info.deadline:
        return f"deadline {info.deadline.isoformat()} passed"
    over = {
        k: (info.usage.get(k, 0.0), v) for k, v in info.budget.items() if info.usage.get(k, 0.0) > v
    }
    if not over:
        return None
    spent = ", ".join(f"{k} {used:g} > {limit:g}" for k, (used, limit) in over.items())
    return f"budget exceeded: {spent}"
