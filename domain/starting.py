"""Starting runs: a run with its main channel, whose first event creates state version 1.

A start without an ``operation_id`` gets one up front, so a lost reply is replayed, never a second
run (docs/lost-replies.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any
from uuid import UUID, uuid4

from actae.domain.aggregate import Aggregate
from actae.domain.channel import Channel
from actae.domain.operation import Operation
from actae.domain.pipeline import Once, Shell, retried
from actae.domain.reader import StoreReader, run_info_of
from actae.domain.run import Run
from actae.domain.validation import (
    fingerprint,
    optional_deadline,
    optional_text,
    require_amounts,
    require_pins,
    require_text,
    require_uuid,
    storable_trace_context,
)
from actae.domain.values import RunInfo

Note = tuple[str, dict[str, Any]]
"""The opening event of a run's main channel: its kind and payload."""
TraceContext = Mapping[str, str] | None
"""Where a start or fork happened in a trace: kept with the run, never in its content."""


def start_run(
    shell: Shell,
    trace_context: TraceContext,
    workflow_id: str,
    *,
    agent_id: str,
    state: dict[str, Any],
    pins: Mapping[str, Any] | None = None,
    operation_id: str | None = None,
    deadline: datetime | None = None,
    parent_run_id: UUID | str | None = None,
    budget: Mapping[str, float] | None = None,
) -> RunInfo:
    """Start a run: its main channel opens at cursor 1 with state version 1.

    The same ``operation_id`` and content again returns the original with ``replayed=True``. A run
    past its ``budget`` (caps on recorded usage) or ``deadline`` fails at its next step boundary.
    """
    core, reader = shell.core, shell.reader
    workflow_id = require_text("workflow_id", workflow_id)
    agent_id = require_text("agent_id", agent_id)
    document = core.document("state", state)
    checked_pins = require_pins("pins", pins)
    operation_id = optional_text("operation_id", operation_id)
    deadline = optional_deadline("deadline", deadline)
    parent = None if parent_run_id is None else require_uuid("parent_run_id", parent_run_id)
    spend = require_amounts("budget", budget)
    trace = storable_trace_context(trace_context)
    content = fingerprint(
        "start_run",
        workflow_id,
        agent_id,
        document.checksum,
        core.canonical_text(checked_pins.as_dict()),
        str(deadline),
        str(parent),
        *((str(sorted(spend.items())),) if spend else ()),
    )
    once = Once.per_call(operation_id, "start_run", content, lambda op: _replayed(reader, op))

    def attempt(_: int) -> RunInfo:
        parent_run = None if parent is None else reader.run_aggregate(parent)
        at = shell.now()
        run, channel = open_run(
            uuid4(),
            ("run.started", {"workflow_id": workflow_id, "agent_id": agent_id}),
            document.value,
            document.checksum,
            at,
            workflow_id=workflow_id,
            agent_id=agent_id,
            pins=checked_pins,
            deadline=deadline,
            parent_run_id=parent,
            forked_from=None,
            operation_id=operation_id,
            budget=spend,
            trace_context=trace,
        )
        aggregates: list[Aggregate] = [run, channel]
        if parent_run is not None:
            parent_run.trigger_event(Run.ChildStarted, timestamp=at, child_run_id=run.id)
            aggregates.append(parent_run)
        result = {"run_id": str(run.id), "cursor": 1, "state_version": 1}
        shell.save(*aggregates, once.executed(result, at))
        return run_info_of(run, cursor=1, state_version=1)

    what = lambda: f"start of {workflow_id!r} under parent {parent}"  # noqa: E731 - formatted only if it gives up
    return retried(shell, attempt, what, once=once)


def open_run(
    run_id: UUID, opening: Note, state: dict[str, Any], checksum: str, at: datetime, **fields: Any
) -> tuple[Run, Channel]:
    """A new run (``fields``: its start's) and its main channel, opened with ``state``."""
    run = Run.start(run_id=run_id, channel_id=Run.channel_for(run_id), at=at, **fields)
    kind, payload = opening
    channel = Channel.open(
        channel_id=run.channel_id,
        run_id=run_id,
        kind=kind,
        payload=payload,
        state=state,
        state_checksum=checksum,
        operation_id=fields["operation_id"],
        at=at,
    )
    return run, channel


def _replayed(reader: StoreReader, original: Operation) -> RunInfo:
    run = reader.run_aggregate(UUID(original.recorded_result["run_id"]))
    return run_info_of(
        run,
        cursor=original.recorded_result["cursor"],
        state_version=original.recorded_result["state_version"],
        replayed=True,
    )
