"""A per-process memory of the effects this process holds, so completing one need not read it.

A guess, never trusted for an answer: a stale one makes the store refuse the write on ``(effect,
version)``, and the command decides again on the stored effect.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from datetime import datetime
from uuid import UUID

from actae.domain.aggregate import DomainEvent, folded
from actae.domain.operation import Operation

DEFAULT_MAX_EFFECTS = 1_000
"""Far more than one process holds; claims a crash left open are dropped oldest first."""
HELD = (Operation.Claimed, Operation.Renewed)
"""An effect whose newest event is one of these is held: its holder will write again."""


class KnownEffects:
    """The events of each effect this process holds, by the effect's aggregate id."""

    def __init__(self, maxsize: int = DEFAULT_MAX_EFFECTS) -> None:
        self._maxsize = maxsize
        self._events: dict[UUID, tuple[DomainEvent, ...]] = {}
        self._lock = threading.Lock()

    def effect(self, effect_id: UUID, now: datetime) -> Operation | None:
        """The remembered effect while its lease is live at ``now`` (maybe stale), else ``None``."""
        events = self._events.get(effect_id)
        if events is None:
            return None
        effect = folded(events)
        if not isinstance(effect, Operation):  # pragma: no cover - only effects are kept
            return None
        if effect.expires_at is None or effect.expires_at <= now:  # the lease ran out
            self.forget(effect_id)
            return None
        return effect

    def written(self, events: Iterable[DomainEvent]) -> None:
        """Take note of committed events: a registration starts a memory, a settlement ends it."""
        events = list(events)
        if not any(
            isinstance(event, Operation.Registered) or event.originator_id in self._events
            for event in events
        ):
            return  # most writes: a channel's events, a command's record
        touched = set()
        with self._lock:
            for event in events:
                effect_id = event.originator_id
                if isinstance(event, Operation.Registered):
                    if len(self._events) >= self._maxsize:
                        del self._events[next(iter(self._events))]
                    self._events[effect_id] = (event,)
                elif effect_id in self._events:
                    known = self._events[effect_id]
                    if known[-1].originator_version + 1 != event.originator_version:
                        del self._events[effect_id]  # a gap: another process wrote between
                        continue
                    self._events[effect_id] = (*known, event)
                else:
                    continue
                touched.add(effect_id)
            for effect_id in touched:
                newest = self._events.get(effect_id, ())[-1:]
                if newest and not isinstance(newest[0], HELD):
                    del self._events[effect_id]

    def forget(self, effect_id: UUID) -> None:
        """Drop the guess for ``effect_id``: a write on it lost a race, so it is stale."""
        with self._lock:
            self._events.pop(effect_id, None)

    def __len__(self) -> int:
        return len(self._events)
