"""What a fork inherits: its ancestors' recorded workflow calls up to each fork boundary.

Calls are named by run (``<run>:step:draft:1``), so a child would run them again; they are indexed
by the part without the run, replayed, and the child goes live after the boundary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from uuid import UUID

from actae.domain.values import ChannelEvent, ForkRecord, Inheritance
from actae.domain.waits import Decision

if TYPE_CHECKING:
    from actae.domain.reader import StoreReader

CALL_KINDS = ("step", "record", "transition")
"""Calls recorded on the channel under their own operation id (values replay from the event)."""
SETTLED_EFFECT_NOTES = {f"effect.{end}": end for end in ("completed", "failed", "abandoned")}
DECISION_NOTES = ("run.approved", "run.denied", "run.signal", "run.timer", "run.expired")


def call_suffix(run_id: UUID, key: str) -> str | None:
    """``step:draft:1`` for ``<run_id>:step:draft:1``; ``None`` for another run's key."""
    prefix = f"{run_id}:"
    return key[len(prefix) :] if key.startswith(prefix) else None


@dataclass(frozen=True, slots=True)
class InheritedEffect:
    """An effect an ancestor claimed at or before the boundary, under its own key."""

    effect_key: str
    settled_at_boundary: str | None
    """How its last attempt before the boundary ended; ``None``: in flight, in doubt."""


@dataclass
class Prefix:
    """The inherited calls of a forked run, by run-independent name."""

    calls: dict[str, ChannelEvent] = field(default_factory=dict)
    effects: dict[str, InheritedEffect] = field(default_factory=dict)
    decisions: dict[str, Decision] = field(default_factory=dict)

    def summary(self, through_cursor: int) -> Inheritance:
        """What the fork receipt says the child inherits."""
        kinds = [suffix.split(":", 1)[0] for suffix in self.calls]
        return Inheritance(
            through_cursor=through_cursor,
            steps=kinds.count("step"),
            records=kinds.count("record"),
            transitions=kinds.count("transition"),
            effects=sum(e.settled_at_boundary == "completed" for e in self.effects.values()),
            decisions=len(self.decisions),
            in_doubt=sorted(
                e.effect_key for e in self.effects.values() if e.settled_at_boundary is None
            ),
        )


def prefix_of(reader: StoreReader, fork: ForkRecord | None) -> Prefix:
    """Everything a run forked by ``fork`` inherits (empty for a run that is no fork)."""
    prefix = Prefix()
    while fork is not None:
        ancestor = reader.run(fork.parent_run_id)
        events = reader.events(fork.parent_channel_id, after=0, limit=fork.requested_boundary)
        _add_level(prefix, ancestor.run_id, events, ancestor.decisions)
        fork = ancestor.forked_from
    return prefix


def _add_level(
    prefix: Prefix, run_id: UUID, events: list[ChannelEvent], decisions: dict[str, Decision]
) -> None:
    """Index one ancestor's prefix; what a nearer ancestor recorded wins."""
    for event in events:
        suffix = None if event.operation_id is None else call_suffix(run_id, event.operation_id)
        if suffix is not None and suffix.split(":", 1)[0] in CALL_KINDS:
            prefix.calls.setdefault(suffix, event)  # whatever its kind: the code chose it
        elif event.kind.startswith("effect."):
            _add_effect(prefix, run_id, event)
        elif event.kind in DECISION_NOTES:
            name = str(event.contents().get("name", ""))
            key = call_suffix(run_id, name) or name
            if name in decisions:
                prefix.decisions.setdefault(key, decisions[name])


def _add_effect(prefix: Prefix, run_id: UUID, event: ChannelEvent) -> None:
    key = str(event.contents().get("effect_key", ""))
    suffix = call_suffix(run_id, key)
    if suffix is None or not suffix.startswith("effect:"):
        return
    if event.kind == "effect.claimed":
        known = prefix.effects.get(suffix)
        if known is None or known.effect_key == key:
            prefix.effects[suffix] = InheritedEffect(key, None)
        return
    outcome = SETTLED_EFFECT_NOTES.get(event.kind)
    if event.kind == "effect.reconciled":
        outcome = str(event.contents().get("outcome"))
    known = prefix.effects.get(suffix)
    if outcome is not None and known is not None and known.effect_key == key:
        prefix.effects[suffix] = InheritedEffect(key, outcome)
