"""Starting runs: a run with its main channel, whose first event creates state version 1.

A run started under a parent is recorded on the parent too, in the same transaction; a lost
race with another change of the parent is retried, and a repeat of the same operation
replays the original run. A start without an ``operation_id`` is recorded under one made up
front, so that an attempt whose write committed unseen (a lost reply) is found and replayed
instead of starting a second run (docs/lost-replies.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any
from uuid import UUID, uuid4

from eventsourcing.persistence import IntegrityError

from actae.domain.aggregate import Aggregate
from actae.domain.channel import Channel
from actae.domain.commands import CommandParts, generated_operation_id
from actae.domain.errors import ContentionError
from actae.domain.forking import FORK_ATTEMPTS
from actae.domain.operation import Operation
from actae.domain.reader import run_info_of
from actae.domain.run import Run
from actae.domain.validation import (
    Document,
    fingerprint,
    optional_deadline,
    optional_text,
    require_amounts,
    require_pins,
    require_text,
    require_uuid,
)
from actae.domain.values import Pins, RunInfo


class StartCommands(CommandParts):
    """The start_run command of the application service (mixed into ActaeService)."""

    def start_run(
        self,
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
        """Start a run with its main channel; cursor 1 creates state version 1.

        ``budget`` caps the usage its steps record (e.g. ``{"tokens": 50_000, "cost": 2.0}``);
        a run past its budget or ``deadline`` stops, failed, at its next step boundary.
        """
        workflow_id = require_text("workflow_id", workflow_id)
        agent_id = require_text("agent_id", agent_id)
        document = self._document("state", state)
        valid_pins = require_pins("pins", pins)
        operation_id = optional_text("operation_id", operation_id)
        valid_deadline = optional_deadline("deadline", deadline)
        parent = None if parent_run_id is None else require_uuid("parent_run_id", parent_run_id)
        limits = require_amounts("budget", budget)
        content = fingerprint(
            "start_run",
            workflow_id,
            agent_id,
            document.checksum,
            self._canonical_text(valid_pins.as_dict()),
            str(valid_deadline),
            str(parent),
            *((str(sorted(limits.items())),) if limits else ()),
        )
        record_id = operation_id or generated_operation_id("start_run")
        for attempt in range(FORK_ATTEMPTS):
            original = self._earlier(attempt, operation_id, record_id, content)
            if original is not None:
                return self._replayed_run(original)
            started = self._try_start(
                workflow_id,
                agent_id,
                document,
                valid_pins,
                (operation_id, record_id),
                valid_deadline,
                parent,
                content,
                limits,
            )
            if started is not None:
                return started
        raise ContentionError(f"start of {workflow_id!r} under parent {parent}", FORK_ATTEMPTS)

    def _try_start(
        self,
        workflow_id: str,
        agent_id: str,
        document: Document,
        pins: Pins,
        operation_ids: tuple[str | None, str],
        deadline: datetime | None,
        parent: UUID | None,
        content: str,
        budget: dict[str, float],
    ) -> RunInfo | None:
        """One attempt at a start; ``None`` when the parent run moved meanwhile.

        ``operation_ids`` is the caller's id (kept on the run) and the one its operation
        record is saved under (the caller's, or one made up for this call).
        """
        operation_id, record_id = operation_ids
        parent_run = None if parent is None else self.reader.run_aggregate(parent)
        at = self.clock()
        run = Run.start(
            run_id=uuid4(),
            workflow_id=workflow_id,
            agent_id=agent_id,
            channel_id=uuid4(),
            pins=pins,
            deadline=deadline,
            parent_run_id=parent,
            forked_from=None,
            operation_id=operation_id,
            at=at,
            budget=budget,
        )
        channel = Channel.open(
            channel_id=run.channel_id,
            run_id=run.id,
            kind="run.started",
            payload={"workflow_id": workflow_id, "agent_id": agent_id},
            state=document.value,
            state_checksum=document.checksum,
            operation_id=operation_id,
            at=at,
        )
        aggregates: list[Aggregate] = [run, channel]
        if parent_run is not None:
            parent_run.record_child(run.id, at=at)
            aggregates.append(parent_run)
        result = {"run_id": str(run.id), "cursor": 1, "state_version": 1}
        try:
            winner = self._save(aggregates, record_id, "start_run", content, result, at)
        except IntegrityError:
            return None
        if winner is not None:
            return self._replayed_run(winner)
        return run_info_of(run, cursor=1, state_version=1)

    def _replayed_run(self, original: Operation) -> RunInfo:
        run = self.reader.run_aggregate(UUID(original.recorded_result["run_id"]))
        return run_info_of(
            run,
            cursor=original.recorded_result["cursor"],
            state_version=original.recorded_result["state_version"],
            replayed=True,
        )
