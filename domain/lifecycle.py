"""Run lifecycle commands: waits and their decisions, operator actions, endings.

Each loads the Run, lets it decide and saves its event with a note on the run's channel
(``run.<what>``) in one transaction; a lost race is decided again, so a due timer fires once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from actae.domain.aggregate import Aggregate
from actae.domain.channel import Channel
from actae.domain.errors import (
    ConflictError,
    IllegalTransitionError,
    NotFoundError,
    ValidationError,
)
from actae.domain.pipeline import RaceLost, Shell, retried
from actae.domain.run import Run
from actae.domain.status import RUNNING_STATUSES
from actae.domain.validation import (
    MAX_REASON_LENGTH,
    optional_text,
    require_int,
    require_number,
    require_text,
    require_uuid,
)
from actae.domain.values import RunInfo, RunStatus
from actae.domain.waits import EXPIRY_ACTIONS, WAIT_REASONS, Decision, Wait

Note = tuple[str, dict[str, Any]]
"""A note on the run's channel: its kind (``run.<what>``) and payload."""
Decide = Callable[[Run, datetime], list[Note]]
"""Moves the run (raising ``IllegalTransitionError`` if it may not) and says what to note."""
Write = Callable[[Channel, datetime], None]
"""Appends to the run's channel instead of notes (a migration's new state version)."""
Migration = Callable[[dict[str, Any]], dict[str, Any]]
"""Upgrades a state of schema n to schema n + 1."""

MAX_WAIT_SECONDS = 10 * 365 * 86400.0


# -- waits --------------------------------------------------------------------------------


def suspend(
    shell: Shell,
    run_id: UUID | str,
    *,
    reason: str,
    name: str,
    seconds: float | None = None,
    on_expiry: str | None = None,
) -> RunInfo:
    """Low-level: make a running run wait, unless its inbox holds the decision for ``name``."""
    if reason not in WAIT_REASONS:
        raise ValidationError("reason", f"expected one of {WAIT_REASONS}, got {reason!r}")
    if on_expiry is not None and on_expiry not in EXPIRY_ACTIONS:
        raise ValidationError("on_expiry", f"expected one of {EXPIRY_ACTIONS}")
    name = require_text("name", name)
    if seconds is not None:
        seconds = require_number("seconds", seconds, minimum=0.0, maximum=MAX_WAIT_SECONDS)

    def decide(run: Run, at: datetime) -> list[Note]:
        if name in run.inbox:  # answered between the caller's look and this wait: go on
            return []
        until = None if seconds is None else at + timedelta(seconds=seconds)
        run.suspend(Wait(reason=reason, name=name, until=until, on_expiry=on_expiry), at=at)
        until_text = None if until is None else until.isoformat()
        return [("run.waiting", {"reason": reason, "name": name, "until": until_text})]

    return _change(shell, require_uuid("run_id", run_id), decide)


def approve(
    shell: Shell, run_id: UUID | str, name: str, *, actor: str, note: str | None = None
) -> RunInfo:
    """Grant the approval ``name``; a run waiting for it wakes up."""
    return _answer(shell, run_id, name, "approved", actor, note, None)


def deny(
    shell: Shell, run_id: UUID | str, name: str, *, actor: str, note: str | None = None
) -> RunInfo:
    """Deny the approval ``name``; a run waiting for it wakes up and sees the denial."""
    return _answer(shell, run_id, name, "denied", actor, note, None)


def signal(
    shell: Shell,
    run_id: UUID | str,
    name: str,
    payload: dict[str, Any] | None = None,
    *,
    actor: str | None = None,
) -> RunInfo:
    """Send the signal ``name`` (kept until the run waits for it, or waking it now)."""
    return _answer(shell, run_id, name, "signal", actor, None, payload)


def _answer(
    shell: Shell,
    run_id: UUID | str,
    name: str,
    kind: str,
    actor: str | None,
    note: str | None,
    payload: dict[str, Any] | None,
) -> RunInfo:
    """Record an approval, denial or signal (``kind``) for ``name``; wakes the run if it waits."""
    name = require_text("name", name)
    actor = optional_text("actor", actor)
    note = optional_text("note", note, max_length=MAX_REASON_LENGTH)
    body = shell.core.document("payload", payload or {})

    def decide(run: Run, at: datetime) -> list[Note]:
        decision = Decision(
            name=name,
            kind=kind,
            actor=actor,
            note=note,  # free text from the approver: contents, sealed with the payload
            noted=note is not None,
            payload=body.value,
            at=at,
        )
        woke = run.decide(decision, at=at)
        return [(f"run.{kind}", {"name": name, "actor": actor, "note": note, "woke": woke})]

    return _change(shell, require_uuid("run_id", run_id), decide)


def wake_due(shell: Shell, run_id: UUID | str) -> bool:
    """Fire the run's due timer, or expire its due approval; True if something happened."""
    fired: list[bool] = []

    def decide(run: Run, at: datetime) -> list[Note]:
        fired.clear()
        wait = run.waiting
        if run.status is not RunStatus.WAITING or wait is None or wait.until is None:
            return []
        if at < wait.until or (wait.escalated and wait.on_expiry == "escalate"):
            return []
        fired.append(True)
        return _expire(run, wait, at)

    _change(shell, require_uuid("run_id", run_id), decide)
    return bool(fired)


def _expire(run: Run, wait: Wait, at: datetime) -> list[Note]:
    if wait.reason == "timer" or wait.on_expiry is None:
        kind = "timer" if wait.reason == "timer" else "expired"
        run.decide(Decision(name=wait.name, kind=kind, at=at), at=at)
        return [(f"run.{kind}", {"name": wait.name})]
    if wait.on_expiry == "escalate":
        run.escalate(at=at)
        return [("run.escalated", {"name": wait.name})]
    run.fail(f"{wait.reason} {wait.name!r} expired", actor="actae", at=at)
    return [("run.failed", {"error": f"{wait.reason} {wait.name!r} expired"})]


# -- operator actions and endings ---------------------------------------------------------


def pause(shell: Shell, run_id: UUID | str, *, actor: str, reason: str) -> RunInfo:
    """Pause a run; its workflow code stops at the next step boundary."""
    return operated(shell, run_id, actor, reason, "paused", Run.pause)


def unpause(shell: Shell, run_id: UUID | str, *, actor: str, reason: str) -> RunInfo:
    """Let a paused run continue."""
    return operated(shell, run_id, actor, reason, "unpaused", Run.unpause)


def retry_run(shell: Shell, run_id: UUID | str, *, actor: str, reason: str) -> RunInfo:
    """Send a failed run back to running; its workflow reruns, replaying every recorded step."""
    return operated(shell, run_id, actor, reason, "retried", Run.retry)


def cancel(shell: Shell, run_id: UUID | str, *, actor: str, reason: str) -> RunInfo:
    """Cancel a run and its children (cooperatively: at the next step boundary)."""
    info = operated(shell, run_id, actor, reason, "cancelled", Run.cancel)
    for child in shell.reader.run_aggregate(info.run_id).children:
        with contextlib.suppress(IllegalTransitionError):  # an ended child needs nothing
            cancel(shell, child, actor=actor, reason=f"parent cancelled: {reason}")
    return info


def complete_run(shell: Shell, run_id: UUID | str, result: dict[str, Any] | None = None) -> RunInfo:
    """Mark a run completed with ``result``; a parent waiting for it is woken with it."""
    value = shell.core.redacted("result", result or {}, None)[0].value

    def decide(run: Run, at: datetime) -> list[Note]:
        run.complete(value, at=at)
        return [("run.completed", {"result": value})]

    return _change(shell, require_uuid("run_id", run_id), decide, tell_parent=True)


def fail_run(shell: Shell, run_id: UUID | str, error: str, *, actor: str) -> RunInfo:
    """Mark a run failed with ``error``; a parent waiting for it is woken."""
    error = require_text("error", error, max_length=1_000_000)[:MAX_REASON_LENGTH]
    actor = require_text("actor", actor)

    def decide(run: Run, at: datetime) -> list[Note]:
        run.fail(error, actor=actor, at=at)
        return [("run.failed", {"error": error, "actor": actor})]

    return _change(shell, require_uuid("run_id", run_id), decide, tell_parent=True)


def operated(
    shell: Shell,
    run_id: UUID | str,
    actor: str,
    reason: str,
    what: str | None,
    move: Callable[..., None],
) -> RunInfo:
    """``move(run, actor=, reason=, at=)``, noted as ``run.<what>`` (``None``: no note)."""
    actor = require_text("actor", actor)
    reason = require_text("reason", reason, max_length=MAX_REASON_LENGTH)

    def decide(run: Run, at: datetime) -> list[Note]:
        move(run, actor=actor, reason=reason, at=at)
        return [] if what is None else [(f"run.{what}", {"actor": actor, "reason": reason})]

    return _change(shell, require_uuid("run_id", run_id), decide)


def migrate(
    shell: Shell,
    run_id: UUID | str,
    *,
    from_schema: int,
    to_schema: int,
    state: dict[str, Any],
    actor: str,
    expected_cursor: int,
) -> RunInfo:
    """Upgrade the run's state, computed at ``expected_cursor``, to the next schema, atomically."""
    from_schema = require_int("from_schema", from_schema, minimum=1)
    to_schema = require_int("to_schema", to_schema, minimum=1)
    if to_schema != from_schema + 1:
        raise ValidationError(
            "to_schema", f"migrations go one schema at a time: expected {from_schema + 1}"
        )
    expected_cursor = require_int("expected_cursor", expected_cursor, minimum=1)
    actor = require_text("actor", actor)
    document = shell.core.document("state", state)

    def decide(run: Run, at: datetime) -> list[Note]:
        run.migrate(from_schema, to_schema, at=at)
        return []

    def write(channel: Channel, at: datetime) -> None:
        channel.ensure_at(expected_version=None, expected_cursor=expected_cursor)
        channel.transition(
            kind="state.migrated",
            payload={"from_schema": from_schema, "to_schema": to_schema, "actor": actor},
            state=document.value,
            state_checksum=document.checksum,
            operation_id=None,
            at=at,
        )

    return _change(shell, require_uuid("run_id", run_id), decide, write=write)


def upgrade(
    shell: Shell,
    run_id: UUID | str,
    *,
    target: int,
    migrations: Mapping[int, Migration],
    actor: str,
) -> RunInfo:
    """Migrate the run's state to schema ``target``, one step at a time from the state it reads.

    A step refused as stale is a lost race, decided again: a state is never rolled back.
    """
    run_id = require_uuid("run_id", run_id)
    target = require_int("target", target, minimum=1)
    actor = require_text("actor", actor)
    reader = shell.reader

    def step(_: int) -> RunInfo:
        run = reader.run(run_id)
        current = run.pins.schema_ or 1
        if current >= target:
            return run
        next_state = migrations[current](reader.state_at(run.channel_id, run.cursor).state)
        try:
            return migrate(
                shell,
                run_id,
                from_schema=current,
                to_schema=current + 1,
                state=next_state,
                actor=actor,
                expected_cursor=run.cursor,
            )
        except (ConflictError, IllegalTransitionError):
            if reader.run(run_id).status not in RUNNING_STATUSES:  # paused, ended: no lost race
                raise
            raise RaceLost from None

    while True:  # one schema per step, each its own lost-race loop
        run = retried(shell, step, lambda: f"migration of run {run_id}")
        if (run.pins.schema_ or 1) >= target:
            return run


# -- saving -------------------------------------------------------------------------------


def _change(
    shell: Shell,
    run_id: UUID,
    decide: Decide,
    *,
    tell_parent: bool = False,
    write: Write | None = None,
) -> RunInfo:
    reader = shell.reader

    def attempt(_: int) -> RunInfo:
        run = reader.run_aggregate(run_id)
        at = shell.now()
        notes = decide(run, at)
        if notes or write is not None:
            channel = Channel.from_head(reader.head_event(run.channel_id))
            if write is not None:
                write(channel, at)
            _note(channel, notes, at)
            pending: list[Aggregate] = [run, channel]
            if tell_parent:
                pending.extend(_tell_parent(shell, run, at))
            shell.save(*pending)
        elif run.pending_events:  # moved with nothing to note (a hold, a forget)
            shell.save(run)
        return reader.run(run_id)

    return retried(shell, attempt, lambda: f"run {run_id}")


def _note(channel: Channel, notes: list[Note], at: datetime) -> None:
    for kind, payload in notes:
        channel.record(kind=kind, payload=payload, operation_id=None, at=at)


def _tell_parent(shell: Shell, run: Run, at: datetime) -> list[Aggregate]:
    """The parent, woken if it waits for ``run``, and its channel with the note."""
    if run.parent_run_id is None:
        return []
    try:
        parent = shell.reader.run_aggregate(run.parent_run_id)
    except NotFoundError:  # purged by retention: nobody waits any more
        return []
    name = f"child:{run.id}"
    if not parent.is_live or name in parent.inbox:
        return []
    payload = {"status": run.status.value, "result": run.result, "error": run.error}
    woke = parent.decide(Decision(name=name, kind="child", payload=payload, at=at), at=at)
    note = ("run.child_finished", {"child_run_id": str(run.id), "woke": woke, **payload})
    channel = Channel.from_head(shell.reader.head_event(parent.channel_id))
    _note(channel, [note], at)
    return [parent, channel]
