"""What a worker makes of a run it could not finish: a log line, a cooldown till it may move."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from actae.adapters.readside.readmodels import moment
from actae.domain.errors import (
    ActaeError,
    ConflictError,
    EffectBlockedError,
    IncompatibleResumeError,
    LeaseHeldError,
    LeaseLostError,
    RetryNotDueError,
    RunStoppedError,
    RunSuspended,
)
from actae.domain.status import worth_a_turn
from actae.domain.values import RunStatus

COOLDOWN = 5.0
"""Seconds before a run that could not advance, for a reason with no known end, is tried again."""
CONFLICT_COOLDOWN = 1.0
"""Seconds before a run that lost a write to another writer is tried again."""


@dataclass(frozen=True)
class Cooldown:
    """When a run that could not advance is worth trying again (it only saves a turn).

    ``until``: store's clock; ``or_after``: ``time.monotonic()``, ends a short pause too.
    An event after ``cursor`` (the head the worker saw) ends it at once.
    """

    until: datetime
    or_after: float = math.inf
    cursor: int | None = None

    @classmethod
    def short(cls, now: datetime, seconds: float) -> Cooldown:
        """A pause of ``seconds`` on whichever clock passes them first."""
        return cls(now + timedelta(seconds=seconds), time.monotonic() + seconds)

    def over(self, now: datetime, head: int | None = None) -> bool:
        """Whether the run may be tried again at ``now`` (store time), its head at ``head``."""
        return now >= self.until or time.monotonic() >= self.or_after or self.moved_past(head)

    def moved_past(self, head: int | None) -> bool:
        """Whether the run's channel has an event the worker had not seen when it stopped."""
        return head is not None and self.cursor is not None and head > self.cursor


def cooldown_for(stop: ActaeError, now: datetime, *, cursor: int | None) -> Cooldown | None:
    """How long a run that stopped with ``stop`` at ``cursor`` cannot advance (None: it moved on).

    A suspended or stopped run must run as soon as it is woken; anything else fails the same
    way until a new event, a lease's expiry or a retry's time.
    """
    if isinstance(stop, RunSuspended | RunStoppedError):
        return None
    if isinstance(stop, LeaseHeldError):
        return Cooldown(stop.expires_at, cursor=cursor)
    if isinstance(stop, RetryNotDueError):
        return Cooldown(stop.retry_at, cursor=cursor)
    seconds = CONFLICT_COOLDOWN if isinstance(stop, ConflictError) else COOLDOWN
    return replace(Cooldown.short(now, seconds), cursor=cursor)


EXPLANATIONS: tuple[tuple[type[ActaeError], Callable[[Any], str]], ...] = (
    (RunSuspended, lambda e: f"waiting for {e.reason} {e.name!r}"),
    (RunStoppedError, lambda e: str(e.status)),
    (RetryNotDueError, lambda e: f"retrying at {e.retry_at.isoformat()}"),
    (EffectBlockedError, lambda e: f"blocked: effect {e.effect_key} is {e.status}"),
    (IncompatibleResumeError, lambda e: f"left for a compatible worker: {e}"),
    (ConflictError, lambda e: f"lost to another worker: {e}"),
    (LeaseHeldError, lambda e: f"lost to another worker: {e}"),
    (LeaseLostError, lambda e: "lease lost while the database was unreachable; left to others"),
)
"""How the log explains each kind of stop, first match wins (``describe_stop``)."""


def explained(stop: ActaeError) -> bool:
    """Whether ``stop`` is a kind the log explains from its fields (``EXPLANATIONS``)."""
    return any(isinstance(stop, kind) for kind, _ in EXPLANATIONS)


def describe_stop(stop: ActaeError) -> str:
    """Why a workflow did not finish in this pass."""
    for kind, describe in EXPLANATIONS:
        if isinstance(stop, kind):
            return describe(stop)
    return f"not advanced: {stop}"


def printable(text: str) -> str:
    """``text`` with lone surrogates and NULs escaped, so the write recording a failure holds it."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")


def run_result(returned: object) -> dict[str, Any]:
    """A run's result (a JSON object) from what its workflow returned: else under ``"value"``."""
    if returned is None:
        return {}
    if isinstance(returned, Mapping):
        return dict(returned)
    return {"value": returned}


def worth_a_turn_at(row: Mapping[str, Any], now: datetime) -> bool:
    """The domain's :func:`~actae.domain.status.worth_a_turn` for a candidate row."""
    return worth_a_turn(
        RunStatus(row["status"]),
        wake_at=moment(row["wake_at"]),
        retry_at=moment(row["next_retry_at"]),
        now=now,
    )
