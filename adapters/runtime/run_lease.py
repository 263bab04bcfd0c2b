"""A worker's lease on one run, kept alive by a heartbeat that outlives database errors.

The lease row (``actae_run_leases``) says which worker should drive a run. Its heartbeat
must not die on the first error: a terminated backend or a restart of PostgreSQL would
otherwise let the lease lapse while the step is still running, and a second worker would
start the same step beside it. So the heartbeat keeps trying, with backoff, for as long as
the lease it last renewed is still valid. Once that time has passed, another worker may
hold the run: the lease counts as lost, and the workflow's context stops at its next step
boundary without writing (fencing tokens and ``expected_cursor`` refuse a late write anyway;
stopping first keeps the step from being started at all).

Validity is measured on this process's monotonic clock from *before* each renewal was
sent, so it never outlasts the expiry the database stored.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from actae.adapters.persistence.outages import Outage, ride_out
from actae.domain.errors import LeaseLostError

if TYPE_CHECKING:
    from actae.adapters.readside.readmodels import ReadModelDB


class RunLease:
    """The lease ``token`` on ``run_id``, renewed every third of ``seconds`` while held."""

    def __init__(
        self,
        db: ReadModelDB,
        run_id: Any,
        *,
        worker: str,
        token: int,
        seconds: float,
        valid_from: float,
        now: Callable[[], datetime],
        outage: Outage,
        on_beat: Callable[[], None] | None = None,
    ) -> None:
        self.run_id = run_id
        self.worker = worker
        self.token = token
        self.seconds = seconds
        self._db = db
        self._now = now
        self._outage = outage
        self._on_beat = on_beat
        self._valid_until = valid_from + seconds  # monotonic
        self._lost = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"lease {run_id}", daemon=True)

    def start(self) -> RunLease:
        """Start heartbeating (until ``stop()``)."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop heartbeating and wait for the heartbeat thread."""
        self._done.set()
        if self._thread.is_alive():
            self._thread.join()

    def remaining(self) -> float:
        """Seconds the lease is surely still valid (0 once lost)."""
        if self._lost.is_set():
            return 0.0
        return max(0.0, self._valid_until - time.monotonic())

    @property
    def lost(self) -> bool:
        """Whether another worker may hold the run now."""
        if not self._lost.is_set() and time.monotonic() >= self._valid_until:
            self._lost.set()
        return self._lost.is_set()

    def ensure_held(self) -> None:
        """Raise :class:`LeaseLostError` once the lease may be someone else's."""
        if self.lost:
            raise LeaseLostError(self.run_id, worker=self.worker)

    def _beat(self) -> None:
        """Renew a third of the way through; through an outage, retry until the lease lapses."""
        while not self._done.wait(min(self.seconds / 3, self.remaining())):
            if self.lost:
                return
            try:
                held = ride_out(
                    self._renew,
                    self._outage,
                    give_up=lambda: self.lost or self._done.is_set(),
                    sleep=self._done.wait,
                )
            except Exception:  # lapsed, stopped, or no outage: the lease ends on its own
                return
            if not held:  # someone else took the run: never write for it again
                self._lost.set()
                return
            if self._on_beat is not None:
                try:  # a companion renewal (the worker's advertisement) is retried next beat
                    self._on_beat()
                except Exception as error:
                    self._outage.began(error)

    def _renew(self) -> bool:
        """One renewal; valid from before it was sent, so never beyond the stored expiry."""
        sent = time.monotonic()
        held = self._db.renew_lease(
            self.run_id, self.token, self._now() + timedelta(seconds=self.seconds)
        )
        if held:
            self._valid_until = sent + self.seconds
        return held
