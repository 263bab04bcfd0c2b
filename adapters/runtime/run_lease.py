"""A worker's lease on one run, kept alive by a heartbeat that outlives database errors.

Dying on the first error, it would let the lease lapse in a database restart while the step
still runs, and a second worker would start it beside it. So it retries while the lease it
last renewed is valid (on this process's monotonic clock from *before* each renewal was
sent, so never beyond the stored expiry); then the lease is lost and the workflow stops at
its next boundary without writing (fencing tokens would refuse a late write anyway).
"""

# ruff: noqa: S608 - SQL assembled from our own constant table and column names, never input

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from actae.adapters.persistence.awaiting import blocking
from actae.adapters.persistence.outages import Outage, ride_out
from actae.adapters.readside.schema import LEASES, WORKERS
from actae.adapters.readside.standings import Transactional
from actae.domain.errors import LeaseLostError


class RunLeases:
    """Which worker holds each run (``actae_run_leases``) and which agents live workers serve.

    A token grows at every take-over; only the holder's renews or releases (store's clock).
    """

    def __init__(self, connection: Transactional) -> None:
        self._db = connection

    @blocking
    def acquire(self, run_id: Any, worker: str, now: datetime, until: datetime) -> int | None:
        """Take the run if nobody holds a live lease on it; returns the new token."""
        db, p = self._db, self._db.mark
        with db.transaction():
            row = db.execute(
                f"INSERT INTO {LEASES} AS l (run_id, worker, token, expires_at) "
                f"VALUES ({p}, {p}, 1, {p}) ON CONFLICT (run_id) DO UPDATE SET "
                "worker = excluded.worker, token = l.token + 1, expires_at = excluded.expires_at "
                f"WHERE l.expires_at <= {p} RETURNING token",
                (self._run_key(run_id), worker, db.adapt(until), db.adapt(now)),
            ).fetchone()
        return None if row is None else int(row[0])

    @blocking
    def renew(self, run_id: Any, token: int, until: datetime) -> bool:
        """Move our lease's expiry to ``until``; False if someone else took the run."""
        db, p = self._db, self._db.mark
        with db.transaction():
            cursor = db.execute(
                f"UPDATE {LEASES} SET expires_at = {p} WHERE run_id = {p} AND token = {p}",
                (db.adapt(until), self._run_key(run_id), token),
            )
            return bool(cursor.rowcount)

    release = renew
    """Let the run go, ``release(run_id, token, now)``: our lease (only ours) expires now."""

    def _run_key(self, run_id: Any) -> Any:  # as run_status.run_id stores it: they join
        return self._db.adapt(UUID(str(run_id)))

    @blocking
    def advertise(self, worker: str, agents: Sequence[str], until: datetime) -> None:
        """Say that ``worker`` runs workflows for ``agents`` until ``until`` (store clock)."""
        db, p = self._db, self._db.mark
        with db.transaction():
            db.execute(f"DELETE FROM {WORKERS} WHERE worker = {p}", (worker,))
            for agent in agents:
                db.execute(
                    f"INSERT INTO {WORKERS} (worker, agent_id, seen_until) VALUES ({p}, {p}, {p})",
                    (worker, agent, db.adapt(until)),
                )


@dataclass(eq=False)
class RunLease:
    """The lease ``token`` on ``run_id``, renewed every third of ``seconds`` while held.

    ``valid_from``: monotonic, before it was taken; ``on_beat`` runs after each renewal.
    """

    leases: RunLeases
    run_id: Any
    _: KW_ONLY
    worker: str
    token: int
    seconds: float
    valid_from: float
    now: Callable[[], datetime]
    outage: Outage
    on_beat: Callable[[], None] | None = None

    def __post_init__(self) -> None:
        self._valid_until = self.valid_from + self.seconds  # monotonic
        self._lost = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"lease {self.run_id}", daemon=True)

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
                    self.outage,
                    give_up=lambda: self.lost or self._done.is_set(),
                    sleep=self._done.wait,
                )
            except Exception:  # lapsed, stopped, or no outage: the lease ends on its own
                return
            if not held:  # someone else took the run: never write for it again
                self._lost.set()
                return
            if self.on_beat is not None:
                try:  # a companion renewal (the worker's advertisement) is retried next beat
                    self.on_beat()
                except Exception as error:
                    self.outage.began(error)

    def _renew(self) -> bool:
        """One renewal; valid from before it was sent, so never beyond the stored expiry."""
        sent = time.monotonic()
        held = self.leases.renew(
            self.run_id, self.token, self.now() + timedelta(seconds=self.seconds)
        )
        if held:
            self._valid_until = sent + self.seconds
        return held
