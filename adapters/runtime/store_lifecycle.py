"""The run-lifecycle part of the public store: approvals, signals, timers, pause, cancel.

Each method builds its command value and runs it through its decide function
(``domain/lifecycle.py``), which checks the input and explains refusals;
:class:`actae.adapters.runtime.store.Store` inherits these.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from actae.adapters.runtime.service import ActaeService
from actae.domain import lifecycle
from actae.domain.commands import (
    Answer,
    Cancel,
    CompleteRun,
    FailRun,
    Pause,
    RetryRun,
    Suspend,
    Unpause,
    WakeDue,
)
from actae.domain.values import RunInfo


class LifecycleMethods:
    """``Store`` methods that move a run through its lifecycle."""

    _service: ActaeService

    def approve(
        self, run_id: UUID | str, name: str, *, actor: str, note: str | None = None
    ) -> RunInfo:
        """Grant the approval ``name``; a run waiting for it wakes up."""
        command = Answer(run_id=run_id, name=name, kind="approved", actor=actor, note=note)
        return self._service.execute(lifecycle.answer, command)

    def deny(
        self, run_id: UUID | str, name: str, *, actor: str, note: str | None = None
    ) -> RunInfo:
        """Deny the approval ``name``; a run waiting for it wakes up and sees the denial."""
        command = Answer(run_id=run_id, name=name, kind="denied", actor=actor, note=note)
        return self._service.execute(lifecycle.answer, command)

    def signal(
        self,
        run_id: UUID | str,
        name: str,
        payload: dict[str, Any] | None = None,
        *,
        actor: str | None = None,
    ) -> RunInfo:
        """Send the signal ``name`` (kept until the run waits for it, or waking it now)."""
        command = Answer(run_id=run_id, name=name, kind="signal", actor=actor, payload=payload)
        return self._service.execute(lifecycle.answer, command)

    def wake_due(self, run_id: UUID | str) -> bool:
        """Fire the run's due timer, or expire its due approval; True if something happened."""
        return self._service.execute(lifecycle.wake_due, WakeDue(run_id=run_id))

    def pause(self, run_id: UUID | str, *, actor: str, reason: str) -> RunInfo:
        """Pause a run; its workflow code stops at the next step boundary."""
        command = Pause(run_id=run_id, actor=actor, reason=reason)
        return self._service.execute(lifecycle.pause, command)

    def unpause(self, run_id: UUID | str, *, actor: str, reason: str) -> RunInfo:
        """Let a paused run continue."""
        command = Unpause(run_id=run_id, actor=actor, reason=reason)
        return self._service.execute(lifecycle.unpause, command)

    def retry_run(self, run_id: UUID | str, *, actor: str, reason: str) -> RunInfo:
        """Send a failed run back to running, audited with ``actor`` and ``reason``.

        Its workflow runs again from the top: every recorded step, record and completed
        effect replays, so only the work after the failure happens again. Steps retried by
        policy start a fresh retry budget.
        """
        command = RetryRun(run_id=run_id, actor=actor, reason=reason)
        return self._service.execute(lifecycle.retry_run, command)

    def cancel(self, run_id: UUID | str, *, actor: str, reason: str) -> RunInfo:
        """Cancel a run and its children (cooperatively: at the next step boundary)."""
        command = Cancel(run_id=run_id, actor=actor, reason=reason)
        return self._service.execute(lifecycle.cancel, command)

    def complete_run(self, run_id: UUID | str, result: dict[str, Any] | None = None) -> RunInfo:
        """Mark a run completed with ``result`` (workers do this when its workflow returns)."""
        command = CompleteRun(run_id=run_id, result=result)
        return self._service.execute(lifecycle.complete_run, command)

    def fail_run(self, run_id: UUID | str, error: str, *, actor: str) -> RunInfo:
        """Mark a run failed with ``error``."""
        command = FailRun(run_id=run_id, error=error, actor=actor)
        return self._service.execute(lifecycle.fail_run, command)

    def suspend(
        self,
        run_id: UUID | str,
        *,
        reason: str,
        name: str,
        seconds: float | None = None,
        on_expiry: str | None = None,
    ) -> RunInfo:
        """Low-level: make a running run wait (RunContext's waits call this)."""
        command = Suspend(
            run_id=run_id, reason=reason, name=name, seconds=seconds, on_expiry=on_expiry
        )
        return self._service.execute(lifecycle.suspend, command)
