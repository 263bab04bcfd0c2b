"""Values of a run's durable waits and the decisions that end them (all events)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field

from actae.domain.aggregate import Value

WAIT_REASONS = ("approval", "timer", "signal", "child")
EXPIRY_ACTIONS = ("fail", "escalate")


class Wait(Value):
    """A run waits for ``name`` (for ``reason``), possibly ``until`` a time."""

    reason: str
    name: str
    until: datetime | None = None
    on_expiry: str | None = None
    escalated: bool = False


class Decision(Value):
    """What ends the wait ``name``: approved, denied, signal, timer, expired or child."""

    name: str
    kind: str
    actor: str | None = None
    note: str | None = None
    noted: bool = False
    """Whether a note was given: metadata, in clear where the note itself is sealed."""
    payload: dict[str, Any] = Field(default_factory=dict)
    at: datetime

    @property
    def approved(self) -> bool:
        """Whether an approval was granted."""
        return self.kind == "approved"
