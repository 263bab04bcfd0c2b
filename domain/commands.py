"""Commands as values: what a caller asked for, exactly as given, before any check.

Each command is decided by one function (named beside it) that validates it first, so a
bad value is a ``ValidationError`` with nothing read and nothing written. ``record`` and
``transition`` have no value here: their decide functions take the façade's arguments
(:mod:`actae.domain.appending`), the pattern the others are to follow. The façades
(``Store`` and its parts) build these from their keyword arguments and hand them to the
pipeline with the decide function: the arguments are listed in the façade and here, and
the rules live only in the decide functions.

Two names guard concurrent writers, and both are the public contract: ``expected_version``
is the *state* version the caller last saw (a transition creates the next one), and
``expected_cursor`` the channel's *log* position (every event takes the next cursor).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from actae.domain.effects import RetryPolicy
from actae.domain.redaction import Redactor

# -- runs (domain/starting.py, domain/forking.py) -----------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class StartRun:
    """Start a run with its main channel, whose cursor 1 creates state version 1."""

    workflow_id: str
    agent_id: str
    state: dict[str, Any]
    pins: Mapping[str, Any] | None = None
    operation_id: str | None = None
    deadline: datetime | None = None
    parent_run_id: UUID | str | None = None
    budget: Mapping[str, float] | None = None
    trace_context: Mapping[str, str] | None = None
    """Where the start happened in a distributed trace; kept with the run, never part of
    the command's content (the same start retried from another span is the same start)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Fork:
    """Start a child run from the state in force at cursor ``at`` of a channel."""

    channel_id: UUID | str
    at: int
    operation_id: str | None = None
    reason: str | None = None
    pins: Mapping[str, Any] | None = None
    trace_context: Mapping[str, str] | None = None
    """Where the fork happened in a distributed trace (as for :class:`StartRun`)."""


# -- the run lifecycle (domain/lifecycle.py) ----------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Suspend:
    """Make a running run wait for ``name``, for at most ``seconds`` if given."""

    run_id: UUID | str
    reason: str
    name: str
    seconds: float | None = None
    on_expiry: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    """Approve, deny or signal (``kind``) the wait ``name``; a run waiting for it wakes."""

    run_id: UUID | str
    name: str
    kind: str
    actor: str | None
    note: str | None = None
    payload: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class WakeDue:
    """Fire the run's timer, or expire its wait, if it is due."""

    run_id: UUID | str


@dataclass(frozen=True, slots=True, kw_only=True)
class OperatorAction:
    """An operator's move on a run, audited with who and why."""

    run_id: UUID | str
    actor: str
    reason: str


class Pause(OperatorAction):
    """Pause a running or waiting run; its workflow stops at the next step boundary."""

    __slots__ = ()


class Unpause(OperatorAction):
    """Let a paused run continue where it was."""

    __slots__ = ()


class RetryRun(OperatorAction):
    """Send a failed run back to running; its recorded steps replay."""

    __slots__ = ()


class Cancel(OperatorAction):
    """Cancel a run and its live children (each at its next step boundary)."""

    __slots__ = ()


class Forget(OperatorAction):
    """Destroy a run's contents for good (its data key); a live run is cancelled with it."""

    __slots__ = ()


class Hold(OperatorAction):
    """Place a legal hold on a run: retention never purges it while the hold lasts."""

    __slots__ = ()


class Release(OperatorAction):
    """Lift a run's legal hold."""

    __slots__ = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class SetRetention:
    """Set how long finished runs are kept: the store's default, or ``agent``'s policy."""

    policy: Mapping[str, Any] | None
    agent: str | None
    actor: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Purge:
    """Replace a finished run's history by its tombstone, if retention says it is due."""

    run_id: UUID
    actor: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CompleteRun:
    """Finish a run with ``result``; a parent waiting for it wakes."""

    run_id: UUID | str
    result: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FailRun:
    """Stop a run with ``error``; a parent waiting for it wakes."""

    run_id: UUID | str
    error: str
    actor: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Migrate:
    """Upgrade a run's state to the next schema, computed from the state at ``cursor``."""

    run_id: UUID | str
    from_schema: int
    to_schema: int
    state: dict[str, Any]
    actor: str
    expected_cursor: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Upgrade:
    """Bring a run's state up to schema ``target``, one ``migrations[n]`` (n -> n + 1) at a time."""

    run_id: UUID | str
    target: int
    migrations: Mapping[int, Callable[[dict[str, Any]], dict[str, Any]]]
    actor: str


# -- the tool-execution ledger (domain/ledger.py) -----------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimEffect:
    """Claim a side effect under a lease, or learn that it already completed."""

    effect_key: str
    run_id: UUID | str
    worker: str
    lease: float
    request: dict[str, Any] | None = None
    retry: RetryPolicy | Mapping[str, Any] | None = None
    timeout: float | None = None
    """Seconds the attempt may take, from the claim: its deadline (``None``: the lease)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Heartbeat:
    """Extend the lease of the claim holding ``token``."""

    effect_key: str
    token: int
    worker: str
    lease: float


@dataclass(frozen=True, slots=True, kw_only=True)
class CompleteEffect:
    """Record that the effect happened, with its result (only its holder may)."""

    effect_key: str
    token: int
    worker: str
    result: dict[str, Any]
    redact: Redactor | None = None
    """Run on ``result`` before the store's own redactor (a workflow's, say)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DoubtEffect:
    """The holder cannot say whether its attempt happened (it answered past its deadline)."""

    effect_key: str
    token: int
    worker: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class FailEffect:
    """Record a failed attempt; the retry policy (and ``retry_after``) schedules the next."""

    effect_key: str
    token: int
    worker: str
    error: str
    retry_after: float | str | None = None
    final: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Reconcile:
    """Settle an effect in doubt, or needing review, from what the provider reports."""

    effect_key: str
    outcome: str
    actor: str
    evidence: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    token: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Override:
    """An operator settles a workflow's effect; ``result`` is what ``ctx.effect`` returns."""

    effect_key: str
    outcome: str
    actor: str
    reason: str
    evidence: object = None
    result: object = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Abandon:
    """Give up on an effect for good; it leaves the run's outstanding effects."""

    effect_key: str
    actor: str
    reason: str
