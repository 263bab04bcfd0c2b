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

from actae.domain.aggregate import Aggregate
from actae.domain.channel import Channel
from actae.domain.commands import (
    Answer,
    Cancel,
    CompleteRun,
    FailRun,
    Migrate,
    OperatorAction,
    Pause,
    RetryRun,
    Suspend,
    Unpause,
    Upgrade,
    WakeDue,
)
from actae.domain.errors import (
    ConflictError,
    IllegalTransitionError,
    NotFoundError,
    ValidationError,
)
from actae.domain.pipeline import Core, retried
from actae.domain.plan import Plan, RaceLost, ask, now, save
from actae.domain.reader import StoreReader
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

MAX_WAIT_SECONDS = 10 * 365 * 86400.0
MIGRATABLE = RUNNING_STATUSES
"""Statuses of a running run (its own, or what its effects make it): it may be migrated."""


# -- waits --------------------------------------------------------------------------------


def suspend(command: Suspend, core: Core) -> Plan[RunInfo]:
    """Make a running run wait for ``name`` (optionally for at most ``seconds``).

    A run whose inbox already holds the decision for ``name`` does not wait: nothing would
    ever wake it (a child that ended, a signal that came after the caller looked, told a run
    that was still running). The answer then shows the decision and the run still running.
    """
    reason, on_expiry = command.reason, command.on_expiry
    if reason not in WAIT_REASONS:
        raise ValidationError("reason", f"expected one of {WAIT_REASONS}, got {reason!r}")
    if on_expiry is not None and on_expiry not in EXPIRY_ACTIONS:
        raise ValidationError("on_expiry", f"expected one of {EXPIRY_ACTIONS}")
    name = require_text("name", command.name)
    seconds = command.seconds
    if seconds is not None:
        seconds = require_number("seconds", seconds, minimum=0.0, maximum=MAX_WAIT_SECONDS)

    def decide(run: Run, at: datetime) -> list[Note]:
        if name in run.inbox:  # answered between the caller's look and this wait: go on
            return []
        until = None if seconds is None else at + timedelta(seconds=seconds)
        run.suspend(Wait(reason=reason, name=name, until=until, on_expiry=on_expiry), at=at)
        until_text = None if until is None else until.isoformat()
        return [("run.waiting", {"reason": reason, "name": name, "until": until_text})]

    return (yield from _change(require_uuid("run_id", command.run_id), decide))


def answer(command: Answer, core: Core) -> Plan[RunInfo]:
    """Record an approval, denial or signal for ``name``; wakes the run if it waits."""
    name = require_text("name", command.name)
    actor = optional_text("actor", command.actor)
    note = optional_text("note", command.note, max_length=MAX_REASON_LENGTH)
    body = core.document("payload", command.payload or {})
    kind = command.kind

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

    return (yield from _change(require_uuid("run_id", command.run_id), decide))


def wake_due(command: WakeDue, core: Core) -> Plan[bool]:
    """Fire the run's timer or expire its wait if due; returns whether anything happened."""
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

    yield from _change(require_uuid("run_id", command.run_id), decide)
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


def pause(command: Pause, core: Core) -> Plan[RunInfo]:
    """Pause a running or waiting run (workflow code stops at its next step)."""
    return (yield from _operator(command, "paused", Run.pause))


def unpause(command: Unpause, core: Core) -> Plan[RunInfo]:
    """Let a paused run continue where it was."""
    return (yield from _operator(command, "unpaused", Run.unpause))


def retry_run(command: RetryRun, core: Core) -> Plan[RunInfo]:
    """Send a failed run back to running; its recorded steps replay when it re-runs."""
    return (yield from _operator(command, "retried", Run.retry))


def cancel(command: Cancel, core: Core) -> Plan[RunInfo]:
    """Cancel a run and its live children; each stops at its next step boundary."""
    info = yield from _operator(command, "cancelled", Run.cancel)
    run = yield from ask(StoreReader.run_aggregate, info.run_id)
    for child in run.children:
        child_run = yield from ask(StoreReader.run_aggregate, child)
        if child_run.is_live:
            # A child that ended meanwhile needs nothing; the parent is cancelled anyway.
            with contextlib.suppress(IllegalTransitionError):
                reason = f"parent cancelled: {command.reason}"
                yield from cancel(Cancel(run_id=child, actor=command.actor, reason=reason), core)
    return info


def complete_run(command: CompleteRun, core: Core) -> Plan[RunInfo]:
    """Finish the run; a parent waiting for it is woken with the result (redacted first)."""
    value = core.redacted("result", command.result or {}, None)[0].value

    def decide(run: Run, at: datetime) -> list[Note]:
        run.complete(value, at=at)
        return [("run.completed", {"result": value})]

    return (yield from _change(require_uuid("run_id", command.run_id), decide, tell_parent=True))


def fail_run(command: FailRun, core: Core) -> Plan[RunInfo]:
    """Stop the run with ``error``; a parent waiting for it is woken."""
    error = require_text("error", command.error, max_length=1_000_000)[:MAX_REASON_LENGTH]
    actor = require_text("actor", command.actor)

    def decide(run: Run, at: datetime) -> list[Note]:
        run.fail(error, actor=actor, at=at)
        return [("run.failed", {"error": error, "actor": actor})]

    return (yield from _change(require_uuid("run_id", command.run_id), decide, tell_parent=True))


def _operator(command: OperatorAction, what: str, move: Callable[..., None]) -> Plan[RunInfo]:
    actor = require_text("actor", command.actor)
    reason = require_text("reason", command.reason, max_length=MAX_REASON_LENGTH)

    def decide(run: Run, at: datetime) -> list[Note]:
        move(run, actor=actor, reason=reason, at=at)
        return [(f"run.{what}", {"actor": actor, "reason": reason})]

    return (yield from _change(require_uuid("run_id", command.run_id), decide))


def migrate(command: Migrate, core: Core) -> Plan[RunInfo]:
    """Upgrade the run's state from ``from_schema`` to the next schema, atomically.

    ``state`` was computed from the state in force at ``expected_cursor`` (the channel's
    log position): if the run is no longer on ``from_schema`` or its channel moved past
    that cursor, the migration is stale (another worker migrated, or the run went on) and
    ``ConflictError`` or ``IllegalTransitionError`` refuses it, writing nothing.
    """
    from_schema = require_int("from_schema", command.from_schema, minimum=1)
    to_schema = require_int("to_schema", command.to_schema, minimum=1)
    if to_schema != from_schema + 1:
        raise ValidationError(
            "to_schema", f"migrations go one schema at a time: expected {from_schema + 1}"
        )
    expected_cursor = require_int("expected_cursor", command.expected_cursor, minimum=1)
    actor = require_text("actor", command.actor)
    document = core.document("state", command.state)

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

    return (yield from _change(require_uuid("run_id", command.run_id), decide, write=write))


def upgrade(command: Upgrade, core: Core) -> Plan[RunInfo]:
    """Migrate the run's state to schema ``target``, each step from the state it reads.

    Each step computes the next schema's state from the state in force at the head and
    migrates at that cursor (:func:`migrate`). A step refused as stale (another worker
    migrated first, or the run moved on) counts as a lost race: the state is read again
    and the step decided again, so a state is never rolled back to a pre-migration copy.
    A run that may not be migrated (paused, ended) is refused as it is.
    """
    run_id = require_uuid("run_id", command.run_id)
    target = require_int("target", command.target, minimum=1)
    actor = require_text("actor", command.actor)

    def step(_: int) -> Plan[RunInfo]:
        run = yield from ask(StoreReader.run, run_id)
        current = run.pins.schema_ or 1
        if current >= target:
            return run
        state = yield from ask(StoreReader.state_at, run.channel_id, run.cursor)
        next_state = command.migrations[current](state.state)
        one = Migrate(
            run_id=run_id,
            from_schema=current,
            to_schema=current + 1,
            state=next_state,
            actor=actor,
            expected_cursor=run.cursor,
        )
        try:
            return (yield from migrate(one, core))
        except (ConflictError, IllegalTransitionError):
            now_run = yield from ask(StoreReader.run, run_id)
            if now_run.status not in MIGRATABLE:  # paused or ended: not a lost race
                raise
            raise RaceLost from None

    while True:  # one schema per step, each its own lost-race loop
        run = yield from retried(step, lambda: f"migration of run {run_id}")
        if (run.pins.schema_ or 1) >= target:
            return run


# -- saving -------------------------------------------------------------------------------


def _change(
    run_id: UUID, decide: Decide, *, tell_parent: bool = False, write: Write | None = None
) -> Plan[RunInfo]:
    """Decide on fresh state and save the run with its channel writes; retry lost races.

    The channel gets the notes ``decide`` returns, or what ``write`` appends instead.
    """

    def attempt(_: int) -> Plan[RunInfo]:
        run = yield from ask(StoreReader.run_aggregate, run_id)
        at = yield from now()
        notes = decide(run, at)
        if notes or write is not None:
            head = yield from ask(StoreReader.head_event, run.channel_id)
            channel = Channel.from_head(head)
            if write is not None:
                write(channel, at)
            _note(channel, notes, at)
            pending: list[Aggregate] = [run, channel]
            if tell_parent:
                pending.extend((yield from _tell_parent(run, at)))
            yield from save(*pending)
        return (yield from ask(StoreReader.run, run_id))

    return (yield from retried(attempt, lambda: f"run {run_id}"))


def _note(channel: Channel, notes: list[Note], at: datetime) -> None:
    for kind, payload in notes:
        channel.record(kind=kind, payload=payload, operation_id=None, at=at)


def _tell_parent(run: Run, at: datetime) -> Plan[list[Aggregate]]:
    """The parent, woken if it waits for ``run``, and its channel with the note."""
    if run.parent_run_id is None:
        return []
    try:
        parent = yield from ask(StoreReader.run_aggregate, run.parent_run_id)
    except NotFoundError:  # purged by retention: nobody waits any more
        return []
    name = f"child:{run.id}"
    if not parent.is_live or name in parent.inbox:
        return []
    payload = {"status": run.status.value, "result": run.result, "error": run.error}
    woke = parent.decide(Decision(name=name, kind="child", payload=payload, at=at), at=at)
    note = ("run.child_finished", {"child_run_id": str(run.id), "woke": woke, **payload})
    head = yield from ask(StoreReader.head_event, parent.channel_id)
    channel = Channel.from_head(head)
    _note(channel, [note], at)
    return [parent, channel]
