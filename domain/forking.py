"""Forks: a child run whose first state is the parent's state at or before a cursor.

The requested boundary resolves to the cursor where the state version in force there was
created; the child copies that state (checksum verified), inherits the parent's pins with the
given overrides, and both runs keep the fork receipt. The receipt counts what the child
inherits: the workflow calls the parent recorded up to the requested boundary, which the
child's workflow code replays instead of running again (``domain/inheritance.py``). Parent
and child are saved in one transaction with the operation record; a lost race with another
fork of the same parent is retried, a repeat of the same operation replays the original
receipt. A fork without an ``operation_id`` is recorded under one made up front, so that an
attempt whose write committed unseen (a lost reply) is replayed, never forked twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID, uuid4

from eventsourcing.persistence import IntegrityError

from actae.domain.channel import Channel
from actae.domain.commands import CommandParts, generated_operation_id
from actae.domain.errors import ConflictError, NotFoundError
from actae.domain.inheritance import prefix_of
from actae.domain.run import Run
from actae.domain.validation import (
    MAX_REASON_LENGTH,
    fingerprint,
    optional_text,
    require_int,
    require_pins,
    require_uuid,
)
from actae.domain.values import ForkReceipt, ForkRecord, StateVersion

if TYPE_CHECKING:
    from actae.domain.aggregate import Aggregate
    from actae.domain.operation import Operation

FORK_ATTEMPTS = 20


class ForkCommands(CommandParts):
    """The fork command of the application service (mixed into ActaeService)."""

    def fork(
        self,
        channel_id: UUID | str,
        *,
        at: int,
        operation_id: str | None = None,
        reason: str | None = None,
        pins: Mapping[str, Any] | None = None,
    ) -> ForkReceipt:
        """Start a child run from the state in force at cursor ``at`` of a channel."""
        cid = require_uuid("channel_id", channel_id)
        at = require_int("at", at, minimum=1)
        operation_id = optional_text("operation_id", operation_id)
        reason = optional_text("reason", reason, max_length=MAX_REASON_LENGTH)
        overrides = require_pins("pins", pins)
        content = fingerprint(
            "fork", str(cid), str(at), str(reason), self._canonical_text(overrides.as_dict())
        )
        record_id = operation_id or generated_operation_id("fork")
        for attempt in range(FORK_ATTEMPTS):
            original = self._earlier(attempt, operation_id, record_id, content)
            if original is not None:
                return self._replayed_fork(original)
            receipt = self._try_fork(cid, at, (operation_id, record_id), reason, overrides, content)
            if receipt is not None:
                return receipt
        head = self.reader.head_event(cid)
        raise ConflictError(
            cid,
            expected_version=None,
            actual_version=head.state_version,
            expected_cursor=None,
            actual_cursor=head.originator_version,
        )

    # -- command internals ----------------------------------------------------------------

    def _try_fork(
        self,
        cid: UUID,
        at: int,
        operation_ids: tuple[str | None, str],
        reason: str | None,
        overrides: Any,
        content: str,
    ) -> ForkReceipt | None:
        """One attempt at a fork; ``None`` when a concurrent fork of the parent won.

        ``operation_ids`` is the caller's id (kept in the receipt) and the one the operation
        record is saved under (the caller's, or one made up for this call).
        """
        operation_id, record_id = operation_ids
        state = self.reader.state_of(self.reader.event_at(cid, at))
        parent = self.reader.run_aggregate(self.reader.head_event(cid).run_id)
        now = self.clock()
        record = self._fork_record(parent, cid, at, state, overrides, reason, operation_id, now)
        child = Run.start(
            run_id=record.child_run_id,
            workflow_id=parent.workflow_id,
            agent_id=parent.agent_id,
            channel_id=record.child_channel_id,
            pins=record.pins,
            deadline=parent.deadline,
            parent_run_id=None,
            forked_from=record,
            operation_id=operation_id,
            at=now,
        )
        channel = Channel.open(
            channel_id=record.child_channel_id,
            run_id=child.id,
            kind="run.forked",
            payload={"parent_channel_id": str(cid), "resolved_boundary": state.cursor},
            state=state.state,
            state_checksum=state.checksum,
            operation_id=operation_id,
            at=now,
        )
        parent.record_fork(record, at=now)
        result = {"child_run_id": str(child.id)}
        try:
            aggregates: list[Aggregate] = [child, channel, parent]
            winner = self._save(aggregates, record_id, "fork", content, result, now)
        except IntegrityError:
            return None
        return record.receipt() if winner is None else self._replayed_fork(winner)

    def _fork_record(
        self,
        parent: Run,
        cid: UUID,
        at: int,
        state: StateVersion,
        overrides: Any,
        reason: str | None,
        operation_id: str | None,
        now: datetime,
    ) -> ForkRecord:
        """The receipt of a fork, counting what the child inherits up to ``at``."""
        record = ForkRecord(
            child_run_id=uuid4(),
            child_channel_id=uuid4(),
            parent_run_id=parent.id,
            parent_channel_id=cid,
            requested_boundary=at,
            resolved_boundary=state.cursor,
            state_version=state.version,
            state_checksum=state.checksum,
            pins=parent.pins.overridden(overrides),
            reason=reason,
            created_at=now,
            operation_id=operation_id,
        )
        inherited = prefix_of(self.reader, record).summary(through_cursor=at)
        return record.model_copy(update={"inherited": inherited})

    def _replayed_fork(self, original: Operation) -> ForkReceipt:
        child = self.reader.run_aggregate(UUID(original.recorded_result["child_run_id"]))
        if child.forked_from is None:  # pragma: no cover - written together with the op
            raise NotFoundError("fork", original.operation_id)
        return child.forked_from.receipt(replayed=True)
