"""The drill's virtual time: jump the shared clock to the next due moment when all is idle.

Every process reads one clock file (``OffsetClock``). When nothing has been written for
``IDLE`` seconds — every run waits for a timer, a retry or a dead worker's lease — the drill
moves the clock to the next such moment and journals the jump, so a day passes in
milliseconds, leases still mean something, and the report can leave scheduled waits out of
its recovery times.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from actae.adapters.persistence.clock import OffsetClock
    from actae.adapters.runtime.store import Store

IDLE = 0.3
"""Seconds without a new event after which the drill jumps the clock."""


class VirtualTime:
    """Jumping the drill's clock over idle waits (a part of ``Drill``)."""

    store: Store
    clock: OffsetClock
    _dead: set[str]
    _last_position: int
    _last_change: float

    def note(self, kind: str, payload: dict[str, Any]) -> None:
        """Journal a fact (``Drill.note``)."""
        raise NotImplementedError

    def _jump_when_idle(self) -> None:
        """Move virtual time to the next due moment once nothing has moved for a while."""
        position = self.store.position()
        if position != self._last_position:
            self._last_position, self._last_change = position, time.monotonic()
            return
        if time.monotonic() - self._last_change < IDLE:
            return
        now = self.store.now()
        due = [(at, why) for at, why in self._due_moments() if at > now]
        if due:
            at, why = min(due)
            seconds = (at - now).total_seconds() + 0.001
            self.clock.advance(seconds)
            self.note(
                "drill.clock_advanced", {"seconds": seconds, "reason": why, "from": now.isoformat()}
            )
            self._last_change = time.monotonic()

    def _due_moments(self) -> list[tuple[datetime, str]]:
        """When something becomes due: timers and waits, retries, and leases running out."""
        projector = self.store.projector()
        projector.catch_up()
        found = [
            (row["wake_at"], "timer")
            for row in projector.db.query(
                "SELECT wake_at FROM run_status WHERE wake_at IS NOT NULL"
            )
        ]
        found += [
            (row["next_retry_at"], "retry")
            for row in projector.db.query(
                "SELECT next_retry_at FROM run_status WHERE next_retry_at IS NOT NULL"
            )
        ]
        # Only a dead worker's leases are waited out: jumping past a live worker's lease
        # while it is inside a step would hand its run to another worker mid-step.
        found += [
            (row["expires_at"], "lease")
            for row in projector.db.query("SELECT worker, expires_at FROM actae_run_leases")
            if row["worker"] in self._dead
        ]
        found += [
            (row["expires_at"], "lease")
            for row in projector.db.query(
                "SELECT holder, expires_at FROM outstanding_effects WHERE status = 'claimed'"
            )
            if row["holder"] in self._dead
        ]
        return [
            (at if isinstance(at, datetime) else datetime.fromisoformat(at), why)
            for at, why in found
        ]
