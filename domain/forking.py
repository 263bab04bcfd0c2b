"""Forks: a child run whose first state is the parent's state at or before a cursor.

The child copies the state in force there (checksum verified) and the parent's pins with overrides;
parent, child and operation record are saved in one transaction.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn
from uuid import UUID, uuid4

from actae.domain.aggregate import Aggregate, picked
from actae.domain.errors import ConflictError, NotFoundError
from actae.domain.inheritance import prefix_of
from actae.domain.operation import Operation
from actae.domain.pipeline import Once, Shell, retried
from actae.domain.reader import StoreReader
from actae.domain.run import Run
from actae.domain.starting import TraceContext, open_run
from actae.domain.validation import (
    MAX_REASON_LENGTH,
    fingerprint,
    optional_text,
    require_int,
    require_pins,
    require_uuid,
    storable_trace_context,
)
from actae.domain.values import ForkReceipt, ForkRecord


def fork(
    shell: Shell,
    trace_context: TraceContext,
    channel_id: UUID | str,
    *,
    at: int,
    operation_id: str | None = None,
    reason: str | None = None,
    pins: Mapping[str, Any] | None = None,
) -> ForkReceipt:
    """Start a child run from the state in force at cursor ``at``; returns the receipt."""
    reader = shell.reader
    cid = require_uuid("channel_id", channel_id)
    at = require_int("at", at, minimum=1)
    operation_id = optional_text("operation_id", operation_id)
    reason = optional_text("reason", reason, max_length=MAX_REASON_LENGTH)
    overrides = require_pins("pins", pins)
    trace = storable_trace_context(trace_context)  # advisory: not in content
    content = fingerprint(
        "fork", str(cid), str(at), str(reason), shell.core.canonical_text(overrides.as_dict())
    )
    once = Once.per_call(operation_id, "fork", content, lambda op: _replayed(reader, op))

    def attempt(_: int) -> ForkReceipt:
        state = reader.state_at(cid, at)
        head = reader.head_event(cid)
        parent = reader.run_aggregate(head.run_id)
        moment = shell.now()
        child_run_id = uuid4()
        record = ForkRecord(
            child_run_id=child_run_id,
            child_channel_id=Run.channel_for(child_run_id),
            parent_run_id=parent.id,
            parent_channel_id=cid,
            requested_boundary=at,
            resolved_boundary=state.cursor,
            state_version=state.version,
            state_checksum=state.checksum,
            pins=parent.pins.overridden(overrides),
            reason=reason,
            created_at=moment,
            operation_id=operation_id,
        )
        prefix = prefix_of(reader, record)
        record = record.model_copy(update={"inherited": prefix.summary(through_cursor=at)})
        opening = {"parent_channel_id": str(cid), "resolved_boundary": state.cursor}
        child, channel = open_run(
            child_run_id,
            ("run.forked", opening),
            state.state,
            state.checksum,
            moment,
            **picked(parent, "workflow_id agent_id deadline"),
            pins=record.pins,
            parent_run_id=None,
            forked_from=record,
            operation_id=operation_id,
            trace_context=trace,
        )
        parent.trigger_event(Run.Forked, timestamp=moment, fork=record)
        aggregates: list[Aggregate] = [child, channel, parent]
        shell.save(*aggregates, once.executed({"child_run_id": str(child.id)}, moment))
        return record.receipt()

    def exhausted() -> NoReturn:
        head = reader.head_event(cid)
        raise ConflictError(
            cid,
            expected_version=None,
            actual_version=head.state_version,
            expected_cursor=None,
            actual_cursor=head.originator_version,
        )

    what = lambda: f"fork of channel {cid}"  # noqa: E731 - formatted only if it gives up
    return retried(shell, attempt, what, once=once, exhausted=exhausted)


def _replayed(reader: StoreReader, original: Operation) -> ForkReceipt:
    child = reader.run_aggregate(UUID(original.recorded_result["child_run_id"]))
    if child.forked_from is None:  # pragma: no cover - written together with the op
        raise NotFoundError("fork", original.operation_id)
    return child.forked_from.receipt(replayed=True)
