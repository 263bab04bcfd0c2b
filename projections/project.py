"""From domain events to read-model changes: run status, lineage, effects, audit, usage.

One function per event type. Every value comes from the event (timestamps too), so a rebuild makes
exactly the tables incremental processing made. An effect's ``status`` is the domain's
time-independent rule (``effect_status``); a lease running out is applied by the adapters on the
store's clock. A run's standing depends on facts in several tables, so its changes ask for it to be
derived again (``RefreshRun``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from actae.domain.aggregate import picked
from actae.domain.channel import Channel
from actae.domain.effects import STEP_RESULT, effect_status
from actae.domain.operation import OVERRIDE_REASON, Operation
from actae.domain.retention import Retention, describe
from actae.domain.run import Run
from actae.domain.status import RunFacts, standing
from actae.domain.values import RunStatus
from actae.projections.changes import Change, Count, EffectOwner, PurgeRun, RefreshRun, Upsert
from actae.projections.heads import ChannelEventHead
from actae.projections.tables import (
    AUDIT,
    EFFECTS,
    LINEAGE,
    RUN_STATUS,
    SUMMARY_LENGTH,
    USAGE,
    USAGE_NAMES,
)

FORK_RECEIPT = (
    "parent_channel_id requested_boundary resolved_boundary state_version state_checksum reason"
)
"""The fork receipt's fields a fork's lineage row keeps, by the same names."""
NOT_IN_DOUBT = {"in_doubt": False, "claimed_in_doubt": False}
STARTED = standing(RunFacts(lifecycle=RunStatus.RUNNING))
"""The standing of a run that just started; later events refresh it (``RefreshRun``)."""
DECISION_ACTIONS = {"approved": "approve", "denied": "deny", "signal": "signal"}
"""Decisions people send, as audit actions (timers, expiries and children are not audited)."""


def project(event: Any) -> list[Change]:
    """The read-model changes implied by ``event`` (none for events no view cares about)."""
    event_type = type(event)
    handler = _BY_TYPE.get(event_type)
    if handler is None:
        handler = _BY_TYPE.setdefault(event_type, handler_of(event_type))
    return handler(event)


def handler_of(event_type: type) -> Callable[[Any], list[Change]]:
    """The first handler of :data:`HANDLERS` for ``event_type`` (:func:`project` caches it)."""
    for handled, handler in HANDLERS:
        if issubclass(event_type, handled):
            return handler
    return _nothing


def _nothing(_event: Any) -> list[Change]:
    return []


def _identity(event: Any) -> dict[str, Any]:
    """What a run's row says of what it is: from its start, or its tombstone (the same)."""
    pins, fork = event.pins, event.forked_from
    return {
        **picked(event, "workflow_id agent_id channel_id parent_run_id"),
        **picked(pins, "model prompt tools"),
        "schema_version": pins.schema_,
        "forked_from_run_id": None if fork is None else fork.parent_run_id,
    }


def _run_started(event: Any) -> list[Change]:
    at = event.timestamp
    values = {
        **_identity(event),
        "status": STARTED.status.value,
        "lifecycle": RunStatus.RUNNING.value,
        "escalated": False,
        "next_action": STARTED.next_action,
        "error": None,
        "unserved": False,
        **dict.fromkeys(("attempts", "open_effects", "in_doubt_effects", "steps_done"), 0),
        "deadline": event.deadline,
        "created_at": at,
        "updated_at": at,
    }
    return [
        Upsert(RUN_STATUS, event.originator_id, values),
        *_lineage(event, at, event.operation_id),
    ]


def _usage_columns(usage: dict[str, float]) -> dict[str, float]:
    """The usage names' totals in ``usage`` (zero for those it lacks)."""
    return {name: usage.get(name, 0.0) for name in USAGE_NAMES}


def _counts_usage(usage: dict[str, float]) -> bool:
    """Whether ``usage`` names anything the read models total (else no usage row)."""
    return not usage.keys().isdisjoint(USAGE_NAMES)


def _lineage(event: Any, created_at: Any, operation_id: str | None) -> list[Change]:
    """The lineage rows of a run from its start (or its tombstone, which keeps the same)."""
    fork = event.forked_from
    changes: list[Change] = []
    common = {
        "workflow_id": event.workflow_id,
        "child_channel_id": event.channel_id,
        "model": event.pins.model,
        "operation_id": operation_id,
        "created_at": created_at,
    }
    if fork is not None:
        receipt = picked(fork, f"parent_run_id {FORK_RECEIPT}")
        values = {**common, **receipt, "relation": "fork"}
        changes.append(Upsert(LINEAGE, event.originator_id, values))
    if event.parent_run_id is not None:
        changes.append(
            Upsert(
                LINEAGE,
                event.originator_id,
                {**common, "parent_run_id": event.parent_run_id, "relation": "child"},
            )
        )
    return changes


NO_USAGE = _usage_columns({})
"""The usage columns of an event without usage (most channel events)."""


def _channel_event(event: Any) -> list[Change]:
    usage = event.usage
    totals = _usage_columns(usage) if usage else NO_USAGE
    values = {
        "head_cursor": event.originator_version,
        "state_version": event.state_version,
        "open_effects": len(event.open_effects),
        **totals,
        "updated_at": event.timestamp,
    }
    changes: list[Change] = [Upsert(RUN_STATUS, event.run_id, values)]
    if event.kind == STEP_RESULT:
        changes.append(Count(RUN_STATUS, event.run_id, "steps_done"))
    if usage and _counts_usage(usage):
        key = (event.originator_id, event.originator_version)
        changes.append(
            Upsert(USAGE, key, {"run_id": event.run_id, "at": event.timestamp, **totals})
        )
    return changes


def _effect(event: Any, values: dict[str, Any], *, refresh: bool = True) -> list[Change]:
    row = Upsert(EFFECTS, event.originator_id, {**values, "updated_at": event.timestamp})
    return [row, RefreshRun(effect_id=event.originator_id)] if refresh else [row]


def _registered(event: Any) -> list[Change]:
    return _effect(
        event,
        {
            "effect_key": event.operation_id,
            "run_id": event.run_id,
            "status": effect_status(),
            "token": 0,
            "attempts": 0,
            **NOT_IN_DOUBT,
        },
        refresh=False,
    )


def _claimed(event: Any) -> list[Change]:
    values = {
        "status": effect_status(held=True),
        "holder": event.worker,
        **picked(event, "token in_doubt expires_at deadline"),
        "attempts": event.token,
        "claimed_in_doubt": event.in_doubt,
        "claimed_at": event.timestamp,
        "retry_at": None,
    }
    if event.token == 1:
        values["first_claimed_at"] = event.timestamp
    return _effect(event, values)


def _renewed(event: Any) -> list[Change]:
    return _effect(event, {"expires_at": event.expires_at}, refresh=False)


def _readable(event: Any, value: Any) -> Any:
    """``value``, or ``None`` where ``event``'s contents are withheld: no plaintext in a table."""
    return None if type(event).withheld else value


def _summary(result: dict[str, Any] | None) -> str | None:
    """The start of an effect's result as compact JSON, for a glance in a table."""
    if result is None:
        return None
    return json.dumps(result, separators=(",", ":"), ensure_ascii=False)[:SUMMARY_LENGTH]


def _completed(event: Any) -> list[Change]:
    return _effect(
        event,
        {
            "status": effect_status(completed=True),
            "holder": None,
            **NOT_IN_DOUBT,
            "settled_by": "completed",
            "result_summary": _summary(_readable(event, event.result)),
        },
    )


def _failed(event: Any) -> list[Change]:
    status = effect_status(needs_review=event.retry_at is None, retry_at=event.retry_at)
    return _effect(
        event,
        {
            "status": status,
            "holder": None,
            **NOT_IN_DOUBT,
            "retry_at": event.retry_at,
            "last_error": _readable(event, event.error),
        },
    )


def _audit(event: Any, action: str, actor: str | None, reason: str | None, **detail: Any) -> Upsert:
    """The audit row of an operator's ``event``, keyed by the event's aggregate and version."""
    return Upsert(
        AUDIT,
        (event.originator_id, event.originator_version),
        {
            "action": action,
            "actor": actor,
            "reason": reason,
            "detail": detail,
            "at": event.timestamp,
        },
    )


def _effect_audit(event: Any, action: str, reason: str | None, **detail: Any) -> list[Change]:
    """An effect's audit row, with the run and key its effects row holds."""
    row = _audit(event, action, event.actor, reason, **detail)
    return [row, EffectOwner(AUDIT, row.key, event.originator_id)]


def _reconciled(event: Any) -> list[Change]:
    if event.outcome == "completed":
        values: dict[str, Any] = {
            "status": effect_status(completed=True),
            "holder": None,
            "settled_by": f"reconciled by {event.actor}",
            "result_summary": _summary(_readable(event, event.result)),
        }
    elif event.keeps_claim:  # the holder keeps its claim: still claimed
        values = {}
    else:  # it did not happen: nothing is under way any more
        values = {"status": effect_status(), "holder": None, "retry_at": None}
    evidence = _readable(event, event.evidence)
    reason = event.override_reason  # an override is a reconciliation with a reason
    if reason is None and evidence is not None:
        reason = evidence.get(OVERRIDE_REASON)
    audit = _effect_audit(
        event,
        "reconcile" if reason is None else "override",
        reason,
        outcome=event.outcome,
        evidence=evidence,
        result=_readable(event, event.result),
    )
    return [*_effect(event, {**values, **NOT_IN_DOUBT}), *audit]


def _abandoned(event: Any) -> list[Change]:
    settled = _effect(
        event,
        {
            "status": effect_status(abandoned=True),
            "holder": None,
            **NOT_IN_DOUBT,
            "settled_by": f"abandoned by {event.actor}",
        },
    )
    return [*settled, *_effect_audit(event, "abandon", event.reason)]


def _run(event: Any, values: dict[str, Any]) -> list[Change]:
    return [
        Upsert(RUN_STATUS, event.originator_id, {**values, "updated_at": event.timestamp}),
        RefreshRun(run_id=event.originator_id),
    ]


NOT_WAITING = {"waiting_reason": None, "waiting_name": None, "wake_at": None, "escalated": False}


def _suspended(event: Any) -> list[Change]:
    wait = event.wait
    return _run(
        event,
        {
            "lifecycle": "waiting",
            "waiting_reason": wait.reason,
            "waiting_name": wait.name,
            "wake_at": wait.until,
            "escalated": False,
            "unserved": False,
        },
    )


def _run_audit(
    event: Any, action: str, actor: str | None, reason: str | None, **detail: Any
) -> Upsert:
    """The audit row of an action on a run."""
    row = _audit(event, action, actor, reason, **detail)
    return Upsert(AUDIT, row.key, {**row.values, "run_id": event.originator_id, "effect_key": None})


def _decided(event: Any) -> list[Change]:
    decision = event.decision
    changes = _run(event, {"lifecycle": "running", **NOT_WAITING}) if event.wakes else []
    action = DECISION_ACTIONS.get(decision.kind)
    if action is None:
        return changes
    payload = _readable(event, decision.payload)
    noted = decision.noted or decision.note is not None  # older events have no ``noted``
    detail = {"name": decision.name, "payload": payload, "woke": event.wakes, "noted": noted}
    note = _readable(event, decision.note)  # sealed on an encrypted store: only its presence
    return [*changes, _run_audit(event, action, decision.actor, note, **detail)]


def _acted(action: str, values: dict[str, Any]) -> Callable[[Any], list[Change]]:
    """An operator's action on a run: its row's ``values``, and the audit row."""
    return lambda event: [
        *_run(event, values),
        _run_audit(event, action, event.actor, event.reason),
    ]


def _ended(lifecycle: str) -> Callable[[Any], list[Change]]:
    return lambda event: _run(
        event,
        {"lifecycle": lifecycle, **NOT_WAITING, "unserved": False, "ended_at": event.timestamp},
    )


def _cancelled(event: Any) -> list[Change]:
    return [*_ended("cancelled")(event), _run_audit(event, "cancel", event.actor, event.reason)]


def _unpaused(event: Any) -> list[Change]:
    resumes_to = event.resumes_to.value
    return [
        *_run(event, {"lifecycle": resumes_to}),
        _run_audit(event, "unpause", event.actor, event.reason, resumes_to=resumes_to),
    ]


def _failed_run(event: Any) -> list[Change]:
    error = _readable(event, event.error)
    values = {
        "lifecycle": "failed",
        **NOT_WAITING,
        "unserved": False,
        "error": error,
        "ended_at": event.timestamp,
    }
    return [*_run(event, values), _run_audit(event, "fail", event.actor, error)]


def _forgotten(event: Any) -> list[Change]:
    values: dict[str, Any] = {"forgotten_at": event.timestamp, "error": None}
    if event.cancels:
        values |= {"lifecycle": "cancelled", **NOT_WAITING, "ended_at": event.timestamp}
    return [*_run(event, values), _run_audit(event, "forget", event.actor, event.reason)]


def _retention(event: Any) -> list[Change]:
    agent = event.agent or "default"
    keep = None if event.keep is None else {s: describe(t) for s, t in event.keep.items()}
    row = _audit(event, "retention", event.actor, None, agent=agent, keep=keep)
    return [Upsert(AUDIT, row.key, {**row.values, "run_id": None, "effect_key": None})]


def _purged(event: Any) -> list[Change]:
    """The tombstone: the run's row from it, and what the purged events fed, gone."""
    values = {
        **_identity(event),
        "lifecycle": event.status.value,
        **NOT_WAITING,
        "unserved": False,
        "error": None,
        "held": False,
        **picked(event, "ended_at forgotten_at state_version"),
        "purged_at": event.timestamp,
        "head_cursor": event.cursor,
        "created_at": event.started_at,
        **_usage_columns(event.usage),
    }
    return [
        *_run(event, values),
        *_lineage(event, event.started_at, None),  # kept, also through a rebuild
        PurgeRun(run_id=event.originator_id),
        _run_audit(event, "purge", event.actor, event.policy, events=event.events),
    ]


HANDLERS: tuple[tuple[type, Callable[[Any], list[Change]]], ...] = (
    (Run.Started, _run_started),
    (Run.Suspended, _suspended),
    (Run.Decided, _decided),
    (Run.Escalated, lambda e: _run(e, {"escalated": True})),
    (Run.Paused, _acted("pause", {"lifecycle": "paused"})),
    (Run.Unpaused, _unpaused),
    (Run.Cancelled, _cancelled),
    (Run.Completed, _ended("completed")),
    (Run.Failed, _failed_run),
    (Run.Retried, _acted("retry", {"lifecycle": "running", "error": None, "ended_at": None})),
    (Run.Forgotten, _forgotten),
    (Run.Held, _acted("hold", {"held": True})),
    (Run.Released, _acted("release", {"held": False})),
    (Run.Purged, _purged),
    (Retention.Defined, _retention),
    (Retention.Changed, _retention),
    (Run.Migrated, lambda e: _run(e, {"schema_version": e.to_schema, "unserved": False})),
    (Channel.Event, _channel_event),
    (ChannelEventHead, _channel_event),  # what the channel handler reads of a channel event
    (Operation.Registered, _registered),
    (Operation.Claimed, _claimed),
    (Operation.Renewed, _renewed),
    (Operation.Doubted, _renewed),  # its lease ends at once: in doubt from then on
    (Operation.Completed, _completed),
    (Operation.Failed, _failed),
    (Operation.Reconciled, _reconciled),
    (Operation.Abandoned, _abandoned),
)
_BY_TYPE: dict[type, Callable[[Any], list[Change]]] = {}
"""Each event type's handler, found once (:func:`handler_of`)."""
