"""The Run aggregate: one execution of an agent workflow, its lifecycle, pins and lineage.

running <-> waiting, running or waiting <-> paused, any live status -> completed | failed |
cancelled. An illegal move raises ``IllegalTransitionError`` naming the status.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar
from uuid import UUID, uuid5

from eventsourcing.domain import CanMutateAggregate
from pydantic import Field

from actae.domain.aggregate import Acted, Aggregate, picked
from actae.domain.errors import IllegalTransitionError, NotWaitingError
from actae.domain.values import ForkRecord, Pins, RunStatus
from actae.domain.waits import Decision, Wait

LINEAGE = "workflow_id agent_id channel_id pins parent_run_id forked_from"
"""What identifies a run and its ancestry: a tombstone keeps it."""
CHANNEL_NAMESPACE = UUID("0b6c3e1d-9a4f-5c2e-8d7b-3f1a2c4e6b8d")
"""The namespace of the main channel ids :meth:`Run.channel_for` derives from run ids."""
APPROVAL_KINDS = frozenset({"approved", "denied"})
"""Decisions that answer an approval the run waits for; a signal may come early."""


class Run(Aggregate, type_name="Run"):
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
        budget: dict[str, float]
        status: RunStatus
        waiting: Wait | None
        paused_from: RunStatus | None
        inbox: dict[str, Decision]
        children: list[UUID]
        result: dict[str, Any] | None
        error: str | None
        retries: int
        trace_context: dict[str, str]
        forgotten_at: datetime | None
        ended_at: datetime | None
        held: bool
        purged_at: datetime | None
        tombstone: Run.Purged | None

    class Started(Aggregate.Created, type_name="Run.Started"):
        """A run was started (fresh, or as the child of a fork when ``forked_from`` is set)."""

        workflow_id: str
        agent_id: str
        channel_id: UUID
        pins: Pins
        deadline: datetime | None
        parent_run_id: UUID | None
        forked_from: ForkRecord | None
        operation_id: str | None
        budget: dict[str, float] = Field(default_factory=dict)
        trace_context: dict[str, str] = Field(default_factory=dict)
        """The W3C trace the run reports into (empty when the starter traced nothing)."""

        def apply(self, aggregate: Any) -> None:
            """Take the run's identity and pins; no forks yet; running."""
            names = f"{LINEAGE} deadline budget trace_context"
            vars(aggregate).update(_present(), **picked(self, names), forks=[])

    class Forked(Aggregate.Event, type_name="Run.Forked"):
        """A child run was forked from this run's channel."""

        fork: ForkRecord

        def apply(self, aggregate: Any) -> None:
            """Remember the child so lineage can walk downwards."""
            aggregate.forks.append(self.fork)

    class ChildStarted(Aggregate.Event, type_name="Run.ChildStarted"):
        """A child run was started on behalf of this run (delegation)."""

        child_run_id: UUID

        def apply(self, aggregate: Any) -> None:
            """Remember the child, so cancelling this run cancels it too."""
            aggregate.children.append(self.child_run_id)

    class Suspended(Aggregate.Event, type_name="Run.Suspended"):
        """The run started waiting."""

        wait: Wait

        def apply(self, aggregate: Any) -> None:
            """Wait."""
            aggregate.status = RunStatus.WAITING
            aggregate.waiting = self.wait

    class Decided(Aggregate.Event, type_name="Run.Decided"):
        """A decision for ``decision.name`` arrived; ``wakes`` if the run waited for it."""

        contents: ClassVar[tuple[str, ...]] = ("decision.payload", "decision.note")
        content_owner: ClassVar[str] = "originator_id"

        decision: Decision
        wakes: bool

        def apply(self, aggregate: Any) -> None:
            """Keep the decision; stop waiting if it was the awaited one."""
            aggregate.inbox[self.decision.name] = self.decision
            if self.wakes:
                aggregate.status = RunStatus.RUNNING
                aggregate.waiting = None

    class Escalated(Aggregate.Event, type_name="Run.Escalated"):
        """An approval expired and the workflow asked to escalate: it still waits."""

        name: str

        def apply(self, aggregate: Any) -> None:
            """Mark the wait escalated."""
            if aggregate.waiting is not None:
                aggregate.waiting = aggregate.waiting.model_copy(update={"escalated": True})

    class Paused(Acted, type_name="Run.Paused"):
        """An operator paused the run."""

        def apply(self, aggregate: Any) -> None:
            """Pause, remembering what to return to."""
            aggregate.paused_from = aggregate.status
            aggregate.status = RunStatus.PAUSED

    class Unpaused(Acted, type_name="Run.Unpaused"):
        """An operator let the run continue, back in the status ``resumes_to``."""

        resumes_to: RunStatus

        def apply(self, aggregate: Any) -> None:
            """Return to the status it had when paused."""
            aggregate.status = self.resumes_to
            aggregate.paused_from = None

    class Cancelled(Acted, type_name="Run.Cancelled"):
        """The run was cancelled; it stops at its next step boundary."""

        def apply(self, aggregate: Any) -> None:
            """Cancel for good."""
            aggregate.status = RunStatus.CANCELLED
            aggregate.waiting = None
            aggregate.ended_at = self.timestamp

    class Completed(Aggregate.Event, type_name="Run.Completed"):
        """The run finished with ``result``."""

        contents: ClassVar[tuple[str, ...]] = ("result",)
        content_owner: ClassVar[str] = "originator_id"

        result: dict[str, Any]

        def apply(self, aggregate: Any) -> None:
            """Finish (with no result to show when it cannot be read)."""
            aggregate.status = RunStatus.COMPLETED
            aggregate.result = None if self.withheld else self.result
            aggregate.ended_at = self.timestamp

    class Failed(Aggregate.Event, type_name="Run.Failed"):
        """The run stopped with ``error`` (an exception, an expiry, a deadline, a budget)."""

        contents: ClassVar[tuple[str, ...]] = ("error",)
        content_owner: ClassVar[str] = "originator_id"

        error: str
        actor: str

        def apply(self, aggregate: Any) -> None:
            """Stop for good (with no error to show when it cannot be read)."""
            aggregate.status = RunStatus.FAILED
            aggregate.waiting = None
            aggregate.error = None if self.withheld else self.error
            aggregate.ended_at = self.timestamp

    class Retried(Acted, type_name="Run.Retried"):
        """An operator sent the failed run back to running; its steps' retries count afresh."""

        def apply(self, aggregate: Any) -> None:
            """Run again; the error stays in history, not in the run's present."""
            aggregate.status = RunStatus.RUNNING
            aggregate.error = None
            aggregate.retries += 1
            aggregate.ended_at = None

    class Forgotten(Acted, type_name="Run.Forgotten"):
        """The run's data key was destroyed: its contents are gone, a live run is cancelled."""

        cancels: bool = False
        """The run was live: forgetting it cancels it."""

        def apply(self, aggregate: Any) -> None:
            """Remember when; stop a live run."""
            aggregate.forgotten_at = self.timestamp
            if self.cancels:
                aggregate.status = RunStatus.CANCELLED
                aggregate.waiting = None
                aggregate.ended_at = self.timestamp

    class Held(Acted, type_name="Run.Held"):
        """A legal hold was placed: retention never purges the run while it lasts."""

        def apply(self, aggregate: Any) -> None:
            """Hold."""
            aggregate.held = True

    class Released(Acted, type_name="Run.Released"):
        """The legal hold was lifted: retention applies again."""

        def apply(self, aggregate: Any) -> None:
            """Release."""
            aggregate.held = False

    class Purged(Aggregate.Created, type_name="Run.Purged"):
        """The run's tombstone, written after its last event: retention deleted the rest."""

        workflow_id: str
        agent_id: str
        channel_id: UUID
        pins: Pins
        parent_run_id: UUID | None
        forked_from: ForkRecord | None
        forks: list[ForkRecord]
        children: list[UUID]
        status: RunStatus
        started_at: datetime
        ended_at: datetime | None
        forgotten_at: datetime | None
        cursor: int
        state_version: int
        usage: dict[str, float]
        events: int
        """How many of its events (run, channel and ledger) were deleted."""
        policy: str
        actor: str

        def mutate(self, aggregate: Any) -> Any:
            """Start the aggregate (the tombstone alone) or end the history it replaces."""
            if aggregate is None:
                return super().mutate(None)
            return CanMutateAggregate.mutate(self, aggregate)

        def apply(self, aggregate: Any) -> None:
            """Become the tombstone: identity, ending and lineage, no contents."""
            vars(aggregate).update(
                _present(),
                **picked(self, f"{LINEAGE} status ended_at forgotten_at"),
                forks=list(self.forks),
                children=list(self.children),
                deadline=None,
                budget={},
                trace_context={},
                purged_at=self.timestamp,
                tombstone=self,
            )

    class Migrated(Aggregate.Event, type_name="Run.Migrated"):
        """The run's state was upgraded from one schema version to the next."""

        from_schema: int | None
        to_schema: int

        def apply(self, aggregate: Any) -> None:
            """Pin the new schema version."""
            aggregate.pins = aggregate.pins.model_copy(update={"schema_": self.to_schema})

    @staticmethod
    def channel_for(run_id: UUID) -> UUID:
        """The main channel id a new run gets (a claim on a run not seen guesses its head there)."""
        return uuid5(CHANNEL_NAMESPACE, str(run_id))

    @classmethod
    def start(cls, *, run_id: UUID, at: datetime, **fields: Any) -> Run:
        """Start a run; ``fields`` are :class:`Started`'s (its main channel is ``channel_id``)."""
        return cls.created(cls.Started, originator_id=run_id, timestamp=at, **fields)

    # -- lifecycle commands ---------------------------------------------------------------

    @property
    def is_live(self) -> bool:
        """Whether the run can still change (not completed, failed or cancelled)."""
        return self.status not in TERMINAL

    def _require(self, action: str, *allowed: RunStatus) -> None:
        if self.status not in allowed:
            raise IllegalTransitionError(self.id, status=self.status.value, action=action)

    def suspend(self, wait: Wait, *, at: datetime) -> None:
        """Start waiting (only a running run can)."""
        self._require("wait", RunStatus.RUNNING)
        self.trigger_event(self.Suspended, timestamp=at, wait=wait)

    def decide(self, decision: Decision, *, at: datetime) -> bool:
        """Record a decision; returns whether it woke the run."""
        if not self.is_live:
            raise IllegalTransitionError(
                self.id, status=self.status.value, action=f"record {decision.kind} for"
            )
        if decision.name in self.inbox:
            raise IllegalTransitionError(
                self.id, status=f"already decided for {decision.name!r}", action="decide"
            )
        wait = self.waiting
        waits_for = wait is not None and wait.name == decision.name
        if decision.kind in APPROVAL_KINDS and (
            wait is None or not waits_for or wait.reason != "approval"
        ):
            raise NotWaitingError(
                self.id,
                name=decision.name,
                kind=decision.kind,
                waiting=[] if wait is None else [f"{wait.reason} {wait.name!r}"],
            )
        wakes = self.status is RunStatus.WAITING and waits_for
        self.trigger_event(self.Decided, timestamp=at, decision=decision, wakes=wakes)
        return wakes

    def escalate(self, *, at: datetime) -> None:
        """Keep waiting, marked escalated."""
        assert self.waiting is not None  # noqa: S101 - callers check the wait
        self.trigger_event(self.Escalated, timestamp=at, name=self.waiting.name)

    def pause(self, *, actor: str, reason: str, at: datetime) -> None:
        """Pause a running or waiting run."""
        self._require("pause", RunStatus.RUNNING, RunStatus.WAITING)
        self.trigger_event(self.Paused, timestamp=at, actor=actor, reason=reason)

    def unpause(self, *, actor: str, reason: str, at: datetime) -> None:
        """Let a paused run continue."""
        self._require("unpause", RunStatus.PAUSED)
        self.trigger_event(
            self.Unpaused,
            timestamp=at,
            actor=actor,
            reason=reason,
            resumes_to=self.paused_from or RunStatus.RUNNING,
        )

    def forget(self, *, actor: str, reason: str, at: datetime) -> None:
        """Record that the run's contents are destroyed (its data key is, after this)."""
        if self.forgotten_at is None:
            self.trigger_event(
                self.Forgotten, timestamp=at, actor=actor, reason=reason, cancels=self.is_live
            )

    def hold(self, *, actor: str, reason: str, at: datetime) -> None:
        """Place a legal hold (once; holding a held run changes nothing)."""
        self._refuse_purged("hold")
        if not self.held:
            self.trigger_event(self.Held, timestamp=at, actor=actor, reason=reason)

    def release(self, *, actor: str, reason: str, at: datetime) -> None:
        """Lift the legal hold (releasing a run not held changes nothing)."""
        self._refuse_purged("release")
        if self.held:
            self.trigger_event(self.Released, timestamp=at, actor=actor, reason=reason)

    def purge(
        self,
        *,
        cursor: int,
        state_version: int,
        usage: dict[str, float],
        events: int,
        policy: str,
        actor: str,
        at: datetime,
    ) -> None:
        """Write the tombstone that replaces the run's history (a retention purge)."""
        self._refuse_purged("purge")
        if self.held or self.is_live:
            raise IllegalTransitionError(
                self.id, status="held" if self.held else self.status.value, action="purge"
            )
        self.trigger_event(
            self.Purged,
            timestamp=at,
            originator_topic=self.type_name,
            **picked(self, f"{LINEAGE} forks children status ended_at forgotten_at"),
            started_at=self.created_on,
            cursor=cursor,
            state_version=state_version,
            usage=usage,
            events=events,
            policy=policy,
            actor=actor,
        )

    def _refuse_purged(self, action: str) -> None:
        if self.purged_at is not None:
            raise IllegalTransitionError(self.id, status="purged", action=action)

    def cancel(self, *, actor: str, reason: str, at: datetime) -> None:
        """Cancel a live run."""
        self._require("cancel", RunStatus.RUNNING, RunStatus.WAITING, RunStatus.PAUSED)
        self.trigger_event(self.Cancelled, timestamp=at, actor=actor, reason=reason)

    def complete(self, result: dict[str, Any], *, at: datetime) -> None:
        """Finish a running run."""
        self._require("complete", RunStatus.RUNNING)
        self.trigger_event(self.Completed, timestamp=at, result=result)

    def fail(self, error: str, *, actor: str, at: datetime) -> None:
        """Stop a live run with an error."""
        self._require("fail", RunStatus.RUNNING, RunStatus.WAITING, RunStatus.PAUSED)
        self.trigger_event(self.Failed, timestamp=at, error=error, actor=actor)

    def retry(self, *, actor: str, reason: str, at: datetime) -> None:
        """Send a failed run back to running (after the cause of its failure was fixed)."""
        self._require("retry", RunStatus.FAILED)
        self.trigger_event(self.Retried, timestamp=at, actor=actor, reason=reason)

    def migrate(self, from_schema: int, to_schema: int, *, at: datetime) -> None:
        """Record a state-schema upgrade of a run still on ``from_schema``."""
        self._require("migrate", RunStatus.RUNNING)
        if (self.pins.schema_ or 1) != from_schema:
            raise IllegalTransitionError(
                self.id,
                status=f"on state schema {self.pins.schema_ or 1}",
                action=f"migrate from schema {from_schema} to {to_schema}",
            )
        self.trigger_event(
            self.Migrated, timestamp=at, from_schema=self.pins.schema_, to_schema=to_schema
        )


def _present() -> dict[str, Any]:
    """A run's present as it starts: running, nothing waited for, decided or ended."""
    unset = "waiting paused_from result error forgotten_at ended_at purged_at tombstone"
    started = {"inbox": {}, "children": [], "retries": 0, "held": False}
    return {**dict.fromkeys(unset.split()), **started, "status": RunStatus.RUNNING}


TERMINAL = frozenset({RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED})
