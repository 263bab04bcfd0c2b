"""Retention: how long a finished run is kept, by its agent and how it ended.

The policies are an aggregate, so setting one is audited and every worker applies the same. A policy
maps end statuses to how long a run is kept (unnamed: forever); an agent's replaces the store's
default for it. A held run is never due.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any
from uuid import uuid5

from actae.domain.aggregate import Aggregate
from actae.domain.errors import ValidationError
from actae.domain.operation import OPERATION_NAMESPACE
from actae.domain.run import TERMINAL, Run

RETENTION_ID = uuid5(OPERATION_NAMESPACE, "actae:retention")
"""The id of the one Retention aggregate of a store."""
DEFAULT = ""
"""The key of the store's default policy (every agent without one of its own)."""
RETAINED_STATUSES = tuple(sorted(status.value for status in TERMINAL))
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "y": 365 * 86400}
DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdwy])\s*$")
MAX_KEEP_SECONDS = 100 * 365 * 86400.0

Policy = dict[str, float]
"""Seconds to keep a run after it ended, by the status it ended in."""


class Retention(Aggregate, type_name="Retention"):
    """The store's retention policies: the default (key ``""``) and one per agent."""

    if TYPE_CHECKING:  # set by events' apply(); not dataclass fields
        policies: dict[str, Policy | None]

    class Defined(Aggregate.Created, type_name="Retention.Defined"):
        """The first policy was set (by ``actor``)."""

        agent: str | None
        keep: Policy | None
        actor: str

        def apply(self, aggregate: Any) -> None:
            """Hold this policy."""
            aggregate.policies = {self.agent or DEFAULT: self.keep}

    class Changed(Aggregate.Event, type_name="Retention.Changed"):
        """A policy was set or replaced (``keep=None``: keep that agent's runs forever)."""

        agent: str | None
        keep: Policy | None
        actor: str

        def apply(self, aggregate: Any) -> None:
            """Replace the agent's (or the default) policy."""
            aggregate.policies[self.agent or DEFAULT] = self.keep

    @classmethod
    def define(cls, *, at: datetime, **fields: Any) -> Retention:
        """The store's first policy (``fields``: :class:`Defined`'s)."""
        return cls.created(cls.Defined, originator_id=RETENTION_ID, timestamp=at, **fields)

    def change(self, *, agent: str | None, keep: Policy | None, actor: str, at: datetime) -> None:
        """Set the policy of ``agent`` (``None``: the store's default)."""
        self.trigger_event(self.Changed, timestamp=at, agent=agent, keep=keep, actor=actor)

    def due(self, run: Run, now: datetime, *, ignoring_hold: bool = False) -> str | None:
        """Why ``run`` is due for purging now (a held one only ``ignoring_hold``), or ``None``."""
        if run.held and not ignoring_hold:
            return None
        if run.purged_at is not None or run.is_live or run.ended_at is None:
            return None
        status, agent = run.status.value, run.agent_id
        policy = self.policies[agent] if agent in self.policies else self.policies.get(DEFAULT)
        seconds = None if policy is None else policy.get(status)  # None: kept forever
        if seconds is None or run.ended_at + timedelta(seconds=seconds) > now:
            return None
        owner = agent if agent in self.policies else "default"
        return f"{owner}: {status} kept {describe(seconds)}"

    def rules(self, now: datetime) -> list[tuple[str | None, str, datetime]]:
        """Finished runs due now, as (agent, status, ended by); agent ``None``: the default."""
        found: list[tuple[str | None, str, datetime]] = []
        for agent, policy in self.policies.items():
            for status, seconds in (policy or {}).items():
                found.append((agent or None, status, now - timedelta(seconds=seconds)))
        return found

    def own_agents(self) -> list[str]:
        """The agents with a policy of their own (the default does not apply to them)."""
        return sorted(agent for agent in self.policies if agent != DEFAULT)

    def shortest(self) -> float | None:
        """The shortest time any policy keeps a run (where purging can start looking)."""
        times = [s for policy in self.policies.values() if policy for s in policy.values()]
        return min(times, default=None)


def require_policy(field: str, value: object) -> Policy | None:
    """A policy as given to ``set_retention``: ``None``, or statuses to durations."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ValidationError(field, f"expected a mapping or None, got {type(value).__name__}")
    policy: Policy = {}
    for status, keep in value.items():
        if status not in RETAINED_STATUSES:
            raise ValidationError(
                f"{field}.{status}",
                f"not a status a run ends in: use {', '.join(RETAINED_STATUSES)}",
            )
        policy[status] = require_duration(f"{field}.{status}", keep)
    return policy


def require_duration(field: str, value: object) -> float:
    """Seconds, from ``"7d"`` (s m h d w y), a number of seconds or a ``timedelta``."""
    seconds: float
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str) and (match := DURATION.match(value)):
        seconds = float(match.group(1)) * UNITS[match.group(2)]
    else:
        raise ValidationError(
            field, f"expected a duration such as '7d', '12h' or seconds, got {value!r:.40}"
        )
    if not 0 < seconds <= MAX_KEEP_SECONDS:
        raise ValidationError(field, "must be more than zero and at most 100 years")
    return seconds


def describe(seconds: float) -> str:
    """``seconds`` in the largest unit that divides it (``604800`` -> ``7d``)."""
    for unit in ("y", "d", "h", "m"):
        if seconds % UNITS[unit] == 0:
            return f"{int(seconds // UNITS[unit])}{unit}"
    return f"{seconds:g}s"


def policy_view(policies: Mapping[str, Policy | None]) -> dict[str, dict[str, str] | None]:
    """The policies as people write them: ``{"default": {"completed": "7d"}, "billing": None}``."""
    return {
        (agent or "default"): None
        if policy is None
        else {status: describe(seconds) for status, seconds in sorted(policy.items())}
        for agent, policy in sorted(policies.items())
    }
