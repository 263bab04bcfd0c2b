"""The Run aggregate: one execution of an agent workflow, its pins and its fork lineage."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

from actae.domain.aggregate import Aggregate
from actae.domain.values import ForkRecord, Pins, RunStatus


class Run(Aggregate):
    """One execution of an agent workflow; owns a main channel and remembers its forks."""

    if TYPE_CHECKING:  # set by events' apply(); not dataclass fields
        workflow_id: str
        agent_id: str
        channel_id: UUID
        pins: Pins
        deadline: datetime | None
        parent_run_id: UUID | None
        forked_from: ForkRecord | None
        forks: list[ForkRecord]
        status: RunStatus

    class Started(Aggregate.Created):
        """A run was started (fresh, or as the child of a fork when ``forked_from`` is set)."""

        workflow_id: str
        agent_id: str
        channel_id: UUID
        pins: Pins
        deadline: datetime | None
        parent_run_id: UUID | None
        forked_from: ForkRecord | None
        operation_id: str | None

        def apply(self, aggregate: Any) -> None:
            """Take the run's identity and pins; no forks yet; running."""
            aggregate.workflow_id = self.workflow_id
            aggregate.agent_id = self.agent_id
            aggregate.channel_id = self.channel_id
            aggregate.pins = self.pins
            aggregate.deadline = self.deadline
            aggregate.parent_run_id = self.parent_run_id
            aggregate.forked_from = self.forked_from
            aggregate.forks = []
            aggregate.status = RunStatus.RUNNING

    class Forked(Aggregate.Event):
        """A child run was forked from this run's channel."""

        fork: ForkRecord

        def apply(self, aggregate: Any) -> None:
            """Remember the child so lineage can walk downwards."""
            aggregate.forks.append(self.fork)

    @classmethod
    def start(
        cls,
        *,
        run_id: UUID,
        workflow_id: str,
        agent_id: str,
        channel_id: UUID,
        pins: Pins,
        deadline: datetime | None,
        parent_run_id: UUID | None,
        forked_from: ForkRecord | None,
        operation_id: str | None,
        at: datetime,
    ) -> Run:
        """Start a run whose main channel is ``channel_id``."""
        return cls._create(
            cls.Started,
            id=run_id,
            timestamp=at,
            workflow_id=workflow_id,
            agent_id=agent_id,
            channel_id=channel_id,
            pins=pins,
            deadline=deadline,
            parent_run_id=parent_run_id,
            forked_from=forked_from,
            operation_id=operation_id,
        )

    def record_fork(self, fork: ForkRecord, *, at: datetime) -> None:
        """Note that ``fork`` created a child of this run."""
        self.trigger_event(self.Forked, timestamp=at, fork=fork)
