"""The run-lifecycle part of the public store: approvals, signals, timers, pause, cancel.

Each method validates nothing itself and forwards to the lifecycle commands, which check
their input and explain refusals; :class:`actae.adapters.store.Store` inherits these.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from actae.domain.service import ActaeService
from actae.domain.values import RunInfo


class LifecycleMethods:
    """``Store`` methods that move a run through its lifecycle."""

    _service: ActaeService

    def approve(
        self, run_id: UUID | str, name: str, *, actor: str, note: str | None = None
    ) -> RunInfo:
        """Grant the approval ``name``; a run waiting for it wakes up."""
        return self._service.lifecycle.decide(run_id, name, "approved", actor=actor, note=note)

    def deny(
        self, run_id: UUID | str, name: str, *, actor: str, note: str | None = None
    ) -> RunInfo:
        """Deny the approval ``name``; a run waiting for it wakes up and sees the denial."""
        return self._service.lifecycle.decide(run_id, name, "denied", actor=actor, note=note)

    def signal(
        self,
        run_id: UUID | str,
        name: str,
        payload: dict[str, Any] | None = None,
        *,
        actor: str | None = None,
    ) -> RunInfo:
        """Send the signal ``name`` (kept until the run waits for it, or waking it now)."""
        return self._service.lifecycle.decide(run_id, name, "signal", actor=actor, payload=payload)

    def wake_due(self, run_id: UUID | str) -> bool:
        """Fire the run's due timer, or expire its due approval; True if something happened."""
        return self._service.lifecycle.wake_due(run_id)

    def pause(self, run_id: UUID | str, *, actor: str, reason: str) -> RunInfo:
        """Pause a run; its workflow code stops at the next step boundary."""
        return self._service.lifecycle.pause(run_id, actor=actor, reason=reason)

    def unpause(self, run_id: UUID | str, *, actor: str, reason: str) -> RunInfo:
        """Let a paused run continue."""
        return self._service.lifecycle.unpause(run_id, actor=actor, reason=reason)

    def retry_run(self, run_id: UUID | str, *, actor: str, reason: str) -> RunInfo:
        """Send a failed run back to running, audited with ``actor`` and ``reason``.

        Its workflow runs again from the top: every recorded step, record and completed
        effect replays, so only the work after the failure happens again. Steps retried by
        policy start a fresh retry budget.
        """
        return self._service.lifecycle.retry_run(run_id, actor=actor, reason=reason)

    def cancel(self, run_id: UUID | str, *, actor: str, reason: str) -> RunInfo:
        """Cancel a run and its children (cooperatively: at the next step boundary)."""
        return self._service.lifecycle.cancel(run_id, actor=actor, reason=reason)

    def complete_run(self, run_id: UUID | str, result: dict[str, Any] | None = None) -> RunInfo:
        """Mark a run completed with ``result`` (workers do this when its workflow returns)."""
        return self._service.lifecycle.complete(run_id, result)

    def fail_run(self, run_id: UUID | str, error: str, *, actor: str) -> RunInfo:
        """Mark a run failed with ``error``."""
        return self._service.lifecycle.fail(run_id, error, actor=actor)

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
        return self._service.lifecycle.suspend(
            run_id, reason=reason, name=name, seconds=seconds, on_expiry=on_expiry
        )
