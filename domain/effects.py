"""Values of the tool-execution ledger: effect status, retry policy, claims, attempts.

An *effect* is a side effect on the world under a caller's key. Between a claim and its completion
nobody knows whether it happened; once the lease expires the store says so (``in_doubt``) instead of
letting anyone silently run it again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any
from uuid import UUID

from pydantic import Field

from actae.domain.aggregate import Value


class EffectStatus(StrEnum):
    """Where an effect stands; ``in_doubt`` is a claim whose lease ran out unanswered."""

    CLAIMED = "claimed"
    IN_DOUBT = "in_doubt"
    RETRY_SCHEDULED = "retry_scheduled"
    NEEDS_REVIEW = "needs_review"
    PENDING = "pending"
    COMPLETED = "completed"
    ABANDONED = "abandoned"


OUTSTANDING = frozenset(EffectStatus) - {EffectStatus.COMPLETED, EffectStatus.ABANDONED}
"""The statuses of an effect not settled yet: all but the two final ones."""


def effect_status(
    *,
    abandoned: bool = False,
    completed: bool = False,
    needs_review: bool = False,
    held: bool = False,
    retry_at: datetime | None = None,
) -> EffectStatus:
    """Where an effect stands by its recorded facts alone, the most final first (no clock)."""
    if abandoned:
        return EffectStatus.ABANDONED
    if completed:
        return EffectStatus.COMPLETED
    if needs_review:
        return EffectStatus.NEEDS_REVIEW
    if held:
        return EffectStatus.CLAIMED
    if retry_at is not None:
        return EffectStatus.RETRY_SCHEDULED
    return EffectStatus.PENDING


def lease_ran_out(expires_at: datetime | None, now: datetime) -> bool:
    """Whether a claim's lease is over at ``now`` (mirrored in SQL by ``readside.standings``)."""
    live = expires_at is not None and now < expires_at
    return not live


STEP_RESULT = "step.result"
"""The kind of channel event ``ctx.step`` records a result as (the read models count them)."""
STEP_ATTEMPTS = ":attempts"
"""Marks the ledger entry that counts a retried step's attempts (no side effect)."""


def step_attempts_key(step_key: str, retry_round: int) -> str:
    """The ledger key counting a step's attempts in a run's ``retry_round`` (0 at first)."""
    return step_key + STEP_ATTEMPTS + (f":round{retry_round}" if retry_round else "")


def counts_step_attempts(effect_key: str) -> bool:
    """Whether ``effect_key`` is a step's attempt counter (no side effect: no deadline)."""
    head, marker, rest = effect_key.rpartition(STEP_ATTEMPTS)
    return bool(head) and bool(marker) and (rest == "" or rest.startswith(":round"))


def retry_after_of(error: BaseException) -> float | str | None:
    """An exception's ``retry_after`` (seconds or a Retry-After header), else ``None``."""
    value = getattr(error, "retry_after", None)
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    return value


def workflow_result(value: Any) -> dict[str, Any]:
    """The ledger result (a JSON object) holding a workflow effect's value under ``value``."""
    return {"value": value}


def workflow_value(result: dict[str, Any] | None) -> Any:
    """What ``ctx.effect`` returns for a ledger result (a plain one, not the envelope, as is)."""
    if result is None:
        return None
    return result["value"] if result.keys() == {"value"} else result


class RetryPolicy(Value):
    """Exponential backoff with full jitter, capped by attempts and total time (5 in ~10 min)."""

    # Stored with the effect: a signed 64-bit integer and finite numbers (JSON has no inf).
    max_attempts: int = Field(default=5, ge=1, le=2**63 - 1)
    initial_delay: float = Field(default=30.0, gt=0, allow_inf_nan=False)
    max_delay: float = Field(default=300.0, gt=0, allow_inf_nan=False)
    max_total: float = Field(default=600.0, gt=0, allow_inf_nan=False)

    def backoff(self, attempt: int, draw: float) -> float:
        """Delay after failed attempt number ``attempt``; ``draw`` is uniform in [0, 1)."""
        ceiling: float = min(self.max_delay, self.initial_delay * 2.0 ** (attempt - 1))
        return draw * ceiling


class Attempt(Value):
    """One claim of an effect and how it ended (``None`` while it is still open)."""

    attempt: int
    token: int
    worker: str
    claimed_at: datetime
    outcome: str | None = None
    detail: str | None = None
    deadline: datetime | None = None
    """When the attempt must be over (claim time plus its timeout; ``None``: no deadline)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Claim:
    """Answer to a claim: ``granted`` (go ahead, pass ``token`` along) or ``completed``.

    ``in_doubt``: an earlier attempt's lease ran out unanswered, so it may have happened.
    """

    effect_key: str
    status: str
    token: int
    attempt: int
    in_doubt: bool
    expires_at: datetime | None
    result: dict[str, Any] | None
    deadline: datetime | None = None
    """When this attempt must be over, on the store's clock (``actae.current_deadline()``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EffectInfo:
    """Everything the ledger knows about an effect, with its full attempt history."""

    effect_key: str
    run_id: UUID
    status: EffectStatus
    token: int
    attempt: int
    holder: str | None
    expires_at: datetime | None
    retry_at: datetime | None
    in_doubt: bool
    last_error: str | None
    result: dict[str, Any] | None
    request: dict[str, Any]
    attempts: list[Attempt]
    deadline: datetime | None = None
    """The current attempt's deadline: nobody takes the effect over before it passes."""
