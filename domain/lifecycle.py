"""Run lifecycle commands: waits and the decisions that end them, operator actions, endings.

Each command loads the Run aggregate, lets it decide (illegal moves raise
``IllegalTransitionError`` naming the current status), and saves the run's event together
with a note on the run's channel (kind ``run.<what>``, with actor and reason), in one
transaction. A lost race is re-decided from fresh state, so a timer fires exactly once even
when several workers find it due at the same moment.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from eventsourcing.persistence import IntegrityError

from actae.domain.channel import Channel
from actae.domain.errors import ContentionError, IllegalTransitionError, ValidationError
from actae.domain.ports import Clock, Codec
from actae.domain.reader import StoreReader
from actae.domain.run import Run
from actae.domain.validation import (
    MAX_REASON_LENGTH,
    optional_text,
    require_document,
    require_int,
    require_number,
    require_text,
    require_uuid,
)
from actae.domain.values import RunInfo, RunStatus
from actae.domain.waits import EXPIRY_ACTIONS, WAIT_REASONS, Decision, Wait

RACE_ATTEMPTS = 50
Note = tuple[str, dict[str, Any]]


class Lifecycle:
    """Commands that move runs through their lifecycle."""

    def __init__(
        self,
        *,
        save: Callable[..., object],
        reader: StoreReader,
        clock: Clock,
        codec: Codec,
        max_document_bytes: int,
    ) -> None:
        self._save = save
        self._reader = reader
        self._clock = clock
        self._codec = codec
        self._max = max_document_bytes

    # -- waits ----------------------------------------------------------------------------

    def suspend(
        self,
        run_id: UUID | str,
        *,
        reason: str,
        name: str,
        seconds: float | None = None,
        on_expiry: str | None = None,
    ) -> RunInfo:
        """Make a running run wait for ``name`` (optionally for at most ``seconds``)."""
        if reason not in WAIT_REASONS:
            raise ValidationError("reason", f"expected one of {WAIT_REASONS}, got {reason!r}")
        if on_expiry is not None and on_expiry not in EXPIRY_ACTIONS:
            raise ValidationError("on_expiry", f"expected one of {EXPIRY_ACTIONS}")
        name = require_text("name", name)
        if seconds is not None:
            seconds = require_number("seconds", seconds, minimum=0.0, maximum=10 * 365 * 86400.0)

        def decide(run: Run, now: datetime) -> list[Note]:
            until = None if seconds is None else now + timedelta(seconds=seconds)
            run.suspend(Wait(reason=reason, name=name, until=until, on_expiry=on_expiry), at=now)
            return [
                (
                    "run.waiting",
                    {
                        "reason": reason,
                        "name": name,
                        "until": None if until is None else until.isoformat(),
                    },
                )
            ]

        return self._change(require_uuid("run_id", run_id), decide)

    def decide(
        self,
        run_id: UUID | str,
        name: str,
        kind: str,
        *,
        actor: str | None,
        note: str | None = None,
        payload: dict[str, Any] | None = None,
    ) -> RunInfo:
        """Record an approval, denial or signal for ``name``; wakes the run if it waits."""
        name = require_text("name", name)
        actor = optional_text("actor", actor)
        note = optional_text("note", note, max_length=MAX_REASON_LENGTH)
        body = require_document("payload", payload or {}, self._codec, max_bytes=self._max)

        def decide(run: Run, now: datetime) -> list[Note]:
            decision = Decision(
                name=name, kind=kind, actor=actor, note=note, payload=body.value, at=now
            )
            woke = run.decide(decision, at=now)
            return [(f"run.{kind}", {"name": name, "actor": actor, "note": note, "woke": woke})]

        return self._change(require_uuid("run_id", run_id), decide)

    def wake_due(self, run_id: UUID | str) -> bool:
        """Fire the run's timer or expire its wait if due; returns whether anything happened."""
        fired: list[bool] = []

        def decide(run: Run, now: datetime) -> list[Note]:
            fired.clear()
            wait = run.waiting
            if run.status is not RunStatus.WAITING or wait is None or wait.until is None:
                return []
            if now < wait.until or (wait.escalated and wait.on_expiry == "escalate"):
                return []
            fired.append(True)
            return self._expire(run, wait, now)

        self._change(require_uuid("run_id", run_id), decide)
        return bool(fired)

    def _expire(self, run: Run, wait: Wait, now: datetime) -> list[Note]:
        if wait.reason == "timer" or wait.on_expiry is None:
            kind = "timer" if wait.reason == "timer" else "expired"
            run.decide(Decision(name=wait.name, kind=kind, at=now), at=now)
            return [(f"run.{kind}", {"name": wait.name})]
        if wait.on_expiry == "escalate":
            run.escalate(at=now)
            return [("run.escalated", {"name": wait.name})]
        run.fail(f"{wait.reason} {wait.name!r} expired", actor="actae", at=now)
        return [("run.failed", {"error": f"{wait.reason} {wait.name!r} expired"})]

    # -- operator actions and endings -----------------------------------------------------

    def pause(self, run_id: UUID | str, *, actor: str, reason: str) -> RunInfo:
        """Pause a running or waiting run (workflow code stops at its next step)."""
        return self._operator(run_id, "paused", actor, reason, Run.pause)

    def unpause(self, run_id: UUID | str, *, actor: str, reason: str) -> RunInfo:
        """Let a paused run continue where it was."""
        return self._operator(run_id, "unpaused", actor, reason, Run.unpause)

    def retry_run(self, run_id: UUID | str, *, actor: str, reason: str) -> RunInfo:
        """Send a failed run back to running; its recorded steps replay when it re-runs."""
        return self._operator(run_id, "retried", actor, reason, Run.retry)

    def cancel(self, run_id: UUID | str, *, actor: str, reason: str) -> RunInfo:
        """Cancel a run and its live children; each stops at its next step boundary."""
        info = self._operator(run_id, "cancelled", actor, reason, Run.cancel)
        for child in self._reader.run_aggregate(info.run_id).children:
            if self._reader.run_aggregate(child).is_live:
                # A child that ended meanwhile needs nothing; the parent is cancelled anyway.
                with contextlib.suppress(IllegalTransitionError):
                    self.cancel(child, actor=actor, reason=f"parent cancelled: {reason}")
        return info

    def complete(self, run_id: UUID | str, result: dict[str, Any] | None = None) -> RunInfo:
        """Finish the run; a parent waiting for it is woken with the result."""
        value = require_document("result", result or {}, self._codec, max_bytes=self._max).value

        def decide(run: Run, now: datetime) -> list[Note]:
            run.complete(value, at=now)
            return [("run.completed", {"result": value})]

        return self._change(require_uuid("run_id", run_id), decide, tell_parent=True)

    def fail(self, run_id: UUID | str, error: str, *, actor: str) -> RunInfo:
        """Stop the run with ``error``; a parent waiting for it is woken."""
        error = require_text("error", error, max_length=1_000_000)[:MAX_REASON_LENGTH]
        actor = require_text("actor", actor)

        def decide(run: Run, now: datetime) -> list[Note]:
            run.fail(error, actor=actor, at=now)
            return [("run.failed", {"error": error, "actor": actor})]

        return self._change(require_uuid("run_id", run_id), decide, tell_parent=True)

    def _operator(
        self, run_id: UUID | str, what: str, actor: str, reason: str, move: Callable[..., None]
    ) -> RunInfo:
        actor = require_text("actor", actor)
        reason = require_text("reason", reason, max_length=MAX_REASON_LENGTH)

        def decide(run: Run, now: datetime) -> list[Note]:
            move(run, actor=actor, reason=reason, at=now)
            return [(f"run.{what}", {"actor": actor, "reason": reason})]

        return self._change(require_uuid("run_id", run_id), decide)

    def migrate(
        self,
        run_id: UUID | str,
        *,
        from_schema: int,
        to_schema: int,
        state: dict[str, Any],
        actor: str,
        expected_cursor: int,
    ) -> RunInfo:
        """Upgrade the run's state from ``from_schema`` to the next schema, atomically.

        ``state`` was computed from the state in force at ``expected_cursor``: if the run is
        no longer on ``from_schema`` or its channel moved past that cursor, the migration is
        stale (another worker migrated, or the run went on) and ``ConflictError`` or
        ``IllegalTransitionError`` refuses it, writing nothing.
        """
        from_schema = require_int("from_schema", from_schema, minimum=1)
        to_schema = require_int("to_schema", to_schema, minimum=1)
        if to_schema != from_schema + 1:
            raise ValidationError(
                "to_schema", f"migrations go one schema at a time: expected {from_schema + 1}"
            )
        expected_cursor = require_int("expected_cursor", expected_cursor, minimum=1)
        actor = require_text("actor", actor)
        document = require_document("state", state, self._codec, max_bytes=self._max)

        def decide(run: Run, now: datetime) -> list[Note]:
            run.migrate(from_schema, to_schema, at=now)
            return []

        def write(channel: Channel, now: datetime) -> None:
            channel.ensure_at(expected_version=None, expected_cursor=expected_cursor)
            channel.transition(
                kind="state.migrated",
                payload={"from_schema": from_schema, "to_schema": to_schema, "actor": actor},
                state=document.value,
                state_checksum=document.checksum,
                operation_id=None,
                at=now,
            )

        return self._change(require_uuid("run_id", run_id), decide, write=write)

    # -- saving ---------------------------------------------------------------------------

    def _change(
        self,
        run_id: UUID,
        decide: Callable[[Run, datetime], list[Note]],
        *,
        tell_parent: bool = False,
        write: Callable[[Channel, datetime], None] | None = None,
    ) -> RunInfo:
        """Decide on fresh state and save the run with its channel writes; retry lost races.

        The channel gets the notes ``decide`` returns, or what ``write`` appends instead.
        """
        for _ in range(RACE_ATTEMPTS):
            run = self._reader.run_aggregate(run_id)
            now = self._clock()
            notes = decide(run, now)
            if not notes and write is None:
                return self._reader.run(run_id)
            channel = Channel.from_head(self._reader.head_event(run.channel_id))
            if write is not None:
                write(channel, now)
            for kind, payload in notes:
                channel.record(kind=kind, payload=payload, operation_id=None, at=now)
            pending: list[Any] = [run, channel]
            if tell_parent:
                pending.extend(self._tell_parent(run, now))
            try:
                self._save(*pending)
            except IntegrityError:
                continue
            return self._reader.run(run_id)
        raise ContentionError(f"run {run_id}", RACE_ATTEMPTS)

    def _noted(self, run: Run, notes: list[Note], now: datetime) -> Channel:
        channel = Channel.from_head(self._reader.head_event(run.channel_id))
        for kind, payload in notes:
            channel.record(kind=kind, payload=payload, operation_id=None, at=now)
        return channel

    def _tell_parent(self, run: Run, now: datetime) -> list[Any]:
        if run.parent_run_id is None:
            return []
        parent = self._reader.run_aggregate(run.parent_run_id)
        name = f"child:{run.id}"
        if not parent.is_live or name in parent.inbox:
            return []
        payload = {"status": run.status.value, "result": run.result, "error": run.error}
        woke = parent.decide(Decision(name=name, kind="child", payload=payload, at=now), at=now)
        note = ("run.child_finished", {"child_run_id": str(run.id), "woke": woke, **payload})
        return [parent, self._noted(parent, [note], now)]
