"""Value objects returned by the store: plain, immutable, comparable, no reference back."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

from actae.domain.aggregate import Value
from actae.domain.custody import locked
from actae.domain.effects import EffectInfo
from actae.domain.errors import ForgottenError
from actae.domain.waits import Decision, Wait

PIN_NAMES = ("model", "prompt", "tools", "schema")


class Pins(BaseModel):
    """Reproducibility metadata of a run: model, prompt, tools, state schema; reads as a mapping."""

    # ``schema`` is a reserved name on pydantic models, hence the alias.
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    model: str | None = None
    prompt: str | None = None
    tools: str | None = None
    schema_: int | None = Field(default=None, alias="schema")

    def __getitem__(self, name: str) -> str | int | None:
        """Read a pin by its contract name (``model``, ``prompt``, ``tools``, ``schema``)."""
        return self.as_dict()[name]

    def as_dict(self) -> dict[str, str | int | None]:
        """The pins as a plain dict keyed by contract names."""
        return self.model_dump(by_alias=True)

    def overridden(self, changes: Pins) -> Pins:
        """These pins with every pin that ``changes`` sets replaced."""
        return self.model_copy(update={k: v for k, v in changes if v is not None})


def pins_from_dict(values: dict[str, Any]) -> Pins:
    """Build :class:`Pins` from contract names (the ``schema`` key maps to ``schema_``)."""
    return Pins.model_validate({name: values.get(name) for name in PIN_NAMES})


class RunStatus(StrEnum):
    """Status of a run: ``retrying`` and ``blocked`` derive from its open effects."""

    RUNNING = "running"
    RETRYING = "retrying"
    BLOCKED = "blocked"
    WAITING = "waiting"
    PAUSED = "paused"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    FORGOTTEN = "forgotten"
    """Its contents were destroyed (``store.forget``); its own status stays in history."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Receipt:
    """Proof that one event is durably on a channel: its cursor and the state version after it."""

    channel_id: UUID
    cursor: int
    state_version: int
    operation_id: str | None
    replayed: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class OperationRecord:
    """A command recorded under an operation id, with the result it returned."""

    operation_id: str
    command: str
    result: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class ChannelEvent:
    """One entry of a channel's gapless log (``state_cursor``: where its state was made)."""

    channel_id: UUID
    run_id: UUID
    cursor: int
    kind: str
    payload: dict[str, Any] | None
    """What was recorded; ``None`` when forgotten or encrypted without the keyring."""
    state_version: int
    state_cursor: int
    operation_id: str | None
    recorded_at: datetime
    position: int | None = None
    """Position in the store's global order (opaque, monotonic), when read from it."""
    forgotten: bool = False
    """The run's contents were destroyed (``store.forget``): ``payload`` is ``None``."""
    redacted: dict[str, int] = field(default_factory=dict)
    """Secrets redaction removed from ``payload`` before it was written, by pattern name."""

    def contents(self) -> dict[str, Any]:
        """The payload, or ``ForgottenError`` / ``KeyringError`` for why it cannot be read."""
        if self.payload is not None:
            return self.payload
        if self.forgotten:
            raise ForgottenError(self.run_id)
        raise locked(self.run_id)


@dataclass(frozen=True, slots=True, kw_only=True)
class StateVersion:
    """An immutable snapshot of agent state, pinned to the cursor of the event that made it."""

    channel_id: UUID
    version: int
    cursor: int
    state: dict[str, Any]
    checksum: str


class Inheritance(Value):
    """What a fork's child replays up to ``through_cursor``; ``in_doubt``: in flight then."""

    through_cursor: int
    steps: int = 0
    records: int = 0
    transitions: int = 0
    effects: int = 0
    decisions: int = 0
    in_doubt: list[str] = Field(default_factory=list)


class ForkRecord(Value):
    """What a fork did, kept by parent and child; the child starts at ``resolved_boundary``."""

    child_run_id: UUID
    child_channel_id: UUID
    parent_run_id: UUID
    parent_channel_id: UUID
    requested_boundary: int
    resolved_boundary: int
    state_version: int
    state_checksum: str
    pins: Pins
    reason: str | None
    created_at: datetime
    operation_id: str | None
    inherited: Inheritance | None = None
    """The recorded calls the child replays from its ancestors."""

    def receipt(self, *, replayed: bool = False) -> ForkReceipt:
        """The public receipt for this fork."""
        return ForkReceipt(**dict(self), replayed=replayed)


class ForkReceipt(ForkRecord):
    """Auditable record of a fork, as returned to the caller (``replayed`` on a repeat)."""

    replayed: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class RunInfo:
    """A run as the store knows it, with the head of its main channel."""

    run_id: UUID
    channel_id: UUID
    workflow_id: str
    agent_id: str
    pins: Pins
    cursor: int
    state_version: int
    status: RunStatus
    created_at: datetime
    deadline: datetime | None = None
    parent_run_id: UUID | None = None
    forked_from: ForkReceipt | None = None
    replayed: bool = False
    waiting: Wait | None = None
    decisions: dict[str, Decision] = field(default_factory=dict)
    result: dict[str, Any] | None = None
    error: str | None = None
    budget: dict[str, float] = field(default_factory=dict)
    usage: dict[str, float] = field(default_factory=dict)
    retries: int = 0
    """How many times an operator sent the failed run back to running (``retry_run``)."""
    trace_context: dict[str, str] = field(default_factory=dict)
    """The W3C trace the run reports into, recorded at its start (docs/telemetry.md)."""
    forgotten_at: datetime | None = None
    """When its contents were destroyed (``store.forget``): no ``result`` or ``error``."""
    held: bool = False
    """A legal hold is on it (``store.hold``): retention never purges it."""
    ended_at: datetime | None = None
    """When it completed, failed or was cancelled (retention counts from then)."""
    purged_at: datetime | None = None
    """When retention purged it: only its tombstone is left."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RetentionReport:
    """What one pass of retention did (``store.apply_retention``, ``actae retention``)."""

    dry_run: bool
    examined: int
    """Finished runs old enough for the shortest policy, looked at."""
    purged: list[UUID]
    """Runs purged (with ``dry_run``: that would have been)."""
    held: int
    """Runs a policy would purge but a legal hold keeps."""
    events_deleted: int
    artifacts_deleted: int
    seconds: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Recovery:
    """What a resuming worker needs: the head's state, the events after it, open effects."""

    state: StateVersion
    events: list[ChannelEvent]
    head_cursor: int
    outstanding: list[EffectInfo] = field(default_factory=list)


@dataclass(frozen=True, slots=True, kw_only=True)
class Lineage:
    """A run's fork receipts (ancestors nearest first, descendants breadth first), its children."""

    run: RunInfo
    ancestors: list[ForkReceipt]
    descendants: list[ForkReceipt]
    children: list[UUID] = field(default_factory=list)
    """Runs started on behalf of this one (delegation); their parent is ``run.parent_run_id``."""
