"""The projector: keeps the read models up to date, in batches, exactly once.

``catch_up()`` processes the backlog, ``start()`` follows live in a thread (woken by this
process's commits, polling for other processes'), ``actae project`` runs it as a process.
Each batch commits with its tracking position. A lease running out is the one change no
event records, so the projector marks such claims in doubt on the store's clock. A
transient database error is waited out with backoff (``adapters/persistence/outages.py``);
any other error stops it. A *poison* event is recorded in ``actae_projection_errors`` and
skipped in the same transaction, so it stays visible. ``rebuild()`` projects from zero into
fresh tables and swaps them in atomically. It logs to ``actae.projector`` (docs/logging.md).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, TextIO

from eventsourcing.persistence import ApplicationRecorder, Mapper, Notification

from actae.adapters.logs import Lines
from actae.adapters.persistence.awaiting import in_portal
from actae.adapters.persistence.codec import PydanticMapper
from actae.adapters.persistence.outages import Outage, is_transient, ride_out
from actae.adapters.readside.read_ahead import ReadAhead
from actae.adapters.readside.readmodels import Batch, ReadModelDB
from actae.adapters.readside.standings import mark_regressed, mark_unserved
from actae.adapters.readside.subscription import Backoff, Waiter, pausing
from actae.domain.ports import Clock
from actae.projections.changes import Change
from actae.projections.project import project
from actae.projections.tables import EFFECTS

NAME = "read_models"
REBUILD_SUFFIX = "__rebuild"
SWEEP_EVERY = 5.0
"""Seconds between lease sweeps while idle: another projector may have applied a claim."""
IDLE_POLL = 1.0
"""Seconds between two looks for other processes' events once the store has gone quiet."""

log = logging.getLogger("actae.projector")


class StoredEvents(Protocol):
    """What the projector reads the store's events through."""

    @property
    def recorder(self) -> ApplicationRecorder:
        """The store's recorder: notifications after a position."""
        ...

    @property
    def metadata_mapper(self) -> Mapper[Any]:
        """Events as the read models see them (contents left sealed)."""
        ...

    @property
    def clock(self) -> Clock:
        """The store's clock, which leases expire by."""
        ...


class EventCounts(Protocol):
    """What the projector asks of the store's backend (``actae.adapters.runtime.backends``)."""

    reads_ahead: bool
    """Whether the next page may be read beside the read models' transaction."""

    def events_after(self, position: int) -> int:
        """How many events are stored after ``position`` (counted up to a million)."""
        ...


def read_events_of(mapper: Mapper[Any]) -> Callable[[Sequence[Notification]], list[Any]]:
    """How the projector decodes a batch: each event, or the exception that refused it.

    An Actae mapper reads the batch in one go, a channel event's head alone where that is all
    the read models could read of it (``PydanticMapper.read_events``); any other decodes
    whole events, one by one.
    """
    if isinstance(mapper, PydanticMapper):
        return mapper.read_events
    return lambda notifications: [_decoded(mapper, n) for n in notifications]


def _decoded(mapper: Mapper[Any], notification: Notification) -> Any:
    try:
        return mapper.to_domain_event(notification)
    except Exception as error:
        return error


@dataclass
class Projected:
    """A batch decoded and projected before its transaction, its changes merged per row.

    Merged event by event, so only the rows live until the write (less for the collector).
    """

    notifications: Sequence[Notification]
    merged: Batch = field(default_factory=Batch)
    poisoned: list[tuple[Notification, Exception]] = field(default_factory=list)
    """The events that could not be decoded or projected, with the reason."""

    @property
    def last(self) -> int:
        """The position the batch ends at."""
        return self.notifications[-1].id


class Projector:
    """Projects the store's events into the read-model tables (``out`` also gets its lines)."""

    def __init__(
        self,
        service: StoredEvents,
        db: ReadModelDB,
        waiter: Callable[[], Waiter],
        *,
        backend: EventCounts,
        batch_size: int = 2000,
        out: TextIO | None = None,
    ) -> None:
        self._recorder = service.recorder
        self._backend = backend
        self._read = read_events_of(service.metadata_mapper)
        self._clock = service.clock
        self._next_expiry: datetime | None = None  # of a live claim, as of the last sweep
        self._swept_at = float("-inf")  # monotonic
        self._ledger_moved = False  # a batch since the last sweep changed effects
        self.db = db
        self._new_waiter = waiter
        self._waiter: Waiter | None = None
        self.batch_size = batch_size
        self._lines = Lines(log, out)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.on_batch: Callable[[Sequence[Notification]], None] | None = None
        self.outage = Outage("actae projector", self._warn)
        self._guesses: dict[str, int] = {}
        """Per tracking name, the position last committed or locked (``process_batch``)."""
        db.ensure_schema()

    # -- batches --------------------------------------------------------------------------

    def process_batch(
        self, *, name: str = NAME, suffix: str = "", pages: ReadAhead | None = None
    ) -> int:
        """Project the next batch after ``name``'s position; returns how many events.

        The batch is read and projected before the read models' transaction, and applied
        only if the position is still the one it was read after. On SQLite that
        transaction holds the write lock an event-store writer may wait for: a read inside
        it could wait behind that writer for ever. ``pages`` reads the next batch ahead.

        The page is read after the position last committed or locked here: a guess that
        saves a read per batch, never trusted (the commit checks it, and an empty page is
        believed only once the stored position agrees).
        """
        guess = self._guesses.get(name)
        position = self.db.position(name) if guess is None else guess
        stored = guess is None
        while True:
            notifications = (
                self._page_after(position) if pages is None else pages.page_after(position)
            )
            if not notifications:
                if not stored:
                    stored, guessed, position = True, position, self.db.position(name)
                    if position != guessed:
                        continue
                self._guesses[name] = position
                return 0
            if pages is not None and len(notifications) == self.batch_size:
                pages.ahead(notifications[-1].id)  # more to come: read it while this applies
            batch = self._projected(notifications)
            try:
                locked = self._commit(batch, position, name, suffix, self._write_merged)
            except Exception as error:
                if is_transient(error):
                    raise
                locked = self._commit(batch, position, name, suffix, self._write_event_by_event)
            if locked == position:
                break
            position, stored = locked, True  # another projector took this batch: read on
        self._guesses[name] = batch.last
        if self.on_batch is not None:
            self.on_batch(notifications)
        return len(notifications)

    def _page_after(self, position: int) -> Sequence[Notification]:
        return self._recorder.select_notifications(start=position + 1, limit=self.batch_size)

    def _projected(self, notifications: Sequence[Notification]) -> Projected:
        """The batch's changes merged, and the events that could not be projected."""
        batch = Projected(notifications)
        add = batch.merged.add
        for notification, event in zip(notifications, self._read(notifications), strict=True):
            if isinstance(event, Exception):  # its body was refused
                batch.poisoned.append((notification, event))
                continue
            try:  # all of an event's changes, or none of them, reach the batch
                changes = project(event)
            except Exception as error:
                batch.poisoned.append((notification, error))
                continue
            for change in changes:
                add(change)
        self._ledger_moved |= any(table == EFFECTS.name for table, _ in batch.merged.rows)
        return batch

    def _changes_of(self, notification: Notification) -> list[Change]:
        (event,) = self._read([notification])
        if isinstance(event, Exception):
            raise event
        return project(event)

    def _commit(
        self,
        batch: Projected,
        position: int,
        name: str,
        suffix: str,
        write: Callable[[Projected, str, str], None],
    ) -> int:
        """Apply ``batch`` and move the position past it, if ``name`` is still at ``position``.

        Returns the position found locked. The move locks the tracking row and commits with
        the changes or not at all. Written merged first, then (after a failure) event by
        event: a batch costs no savepoint unless one of its events is bad.
        """
        with self.db.transaction():
            locked = self.db.move_position(name, position, batch.last)
            if locked != position:
                return locked
            for notification, error in batch.poisoned:
                self._poison(name, notification, error)
            write(batch, name, suffix)
        return locked

    def _write_merged(self, batch: Projected, _name: str, suffix: str) -> None:
        """All the batch's changes in one go (a failure rolls the whole batch back)."""
        self.db.write(batch.merged, suffix)

    def _write_event_by_event(self, batch: Projected, name: str, suffix: str) -> None:
        """Each event in a savepoint of its own; one that fails is kept as a poison event."""
        poisoned = {notification.id for notification, _ in batch.poisoned}
        for notification in batch.notifications:
            if notification.id in poisoned:
                continue
            try:
                with self.db.transaction():
                    self.db.apply(self._changes_of(notification), suffix)
            except Exception as error:
                if is_transient(error):
                    raise
                self._poison(name, notification, error)

    def _poison(self, name: str, notification: Notification, error: Exception) -> None:
        self.db.record_error(
            name,
            notification.id,
            notification.topic,
            str(notification.originator_id),
            f"{type(error).__name__}: {error}",
        )

    # -- running --------------------------------------------------------------------------

    def catch_up(
        self, *, name: str = NAME, suffix: str = "", give_up: Callable[[], bool] | None = None
    ) -> int:
        """Project everything stored so far; shows progress on a large backlog.

        ``give_up()`` ends it early, also during an outage: a worker told to stop must not
        wait for the database first.
        """
        stopping = self._stop.is_set if give_up is None else self._either(give_up)
        total = 0
        started = time.perf_counter()
        backlog = self._with_retries(lambda: self.lag(name=name), stopping)
        # Not in an async caller's portal: waiting for the page read ahead would block its loop.
        reads_ahead = self._backend.reads_ahead and not in_portal()
        pages = ReadAhead(self._page_after) if reads_ahead else None
        try:
            while not stopping():
                done = self._with_retries(
                    lambda: self.process_batch(name=name, suffix=suffix, pages=pages), stopping
                )
                if done == 0:
                    break
                total += done
                if backlog > 10 * self.batch_size:
                    rate = total / max(time.perf_counter() - started, 1e-9)
                    self._lines.say(
                        f"  projected {total:,}/{backlog:,} events ({rate:,.0f} events/s)"
                    )
        finally:
            if pages is not None:
                pages.close()
        self._with_retries(lambda: self.mark_expired(name=name, suffix=suffix), stopping)
        return total

    def _either(self, give_up: Callable[[], bool]) -> Callable[[], bool]:
        return lambda: self._stop.is_set() or give_up()

    def mark_expired(self, *, name: str = NAME, suffix: str = "") -> int:
        """Mark claims whose lease has run out by now (the store's clock) in doubt.

        Under the tracking row's lock, as a batch: it sees every batch before it and never
        runs beside a rebuild's swap. The clock is read first, so a sweep holds one pooled
        connection. Returns 0 (a retryable step).
        """
        now = self._clock()
        with self.db.transaction():
            self.db.lock_position(name)
            self._next_expiry = self.db.expire_claims(now, suffix)
        self._swept_at = time.monotonic()
        self._ledger_moved = False
        return 0

    def mark_unserved(self, now: datetime) -> list[Any]:
        """Flag running runs no live worker serves at ``now``, under the tracking lock."""
        with self.db.transaction():
            self.db.lock_position(NAME)
            return mark_unserved(self.db, now)

    def mark_regressed(self, channel_id: Any, detail: str, now: datetime) -> None:
        """Say on run_status that ``channel_id``'s history went back (``standings``), locked."""
        with self.db.transaction():
            self.db.lock_position(NAME)
            mark_regressed(self.db, channel_id, detail, now)

    def _sweep_due(self) -> bool:
        """Whether the live loop should sweep: effects changed, or a lease may have run out."""
        if self._ledger_moved or time.monotonic() - self._swept_at >= SWEEP_EVERY:
            return True
        return self._next_expiry is not None and self._clock() >= self._next_expiry

    def run(self, poll_interval: float = IDLE_POLL) -> None:
        """Catch up, then follow live until ``stop()``: a batch per look.

        This process's commits wake it; other processes' are found by looking again, soon
        while events flow and every ``poll_interval`` seconds when idle.
        """
        waiter = self._waiter = self._new_waiter()
        backoff = Backoff(poll_interval)
        try:
            self.catch_up()
            while not self._stop.is_set():
                done = self._with_retries(self.process_batch)
                if self._sweep_due():
                    self._with_retries(self.mark_expired)
                if done:
                    backoff.arrived()
                else:
                    waiter.wait(backoff.wait())
        finally:
            self._waiter = None
            waiter.close()

    def start(self) -> Projector:
        """Run in a background thread; ``stop()`` ends it."""
        self._stop.clear()
        self._thread = threading.Thread(target=self.run, name="actae projector", daemon=True)
        self._thread.start()
        return self

    def request_stop(self) -> None:
        """Ask a running projector to stop after its current batch (signal-safe)."""
        self._stop.set()

    def stop(self) -> None:
        """Stop a running projector and wait for its thread (woken: it may be idle for a while)."""
        self._stop.set()
        waiter = self._waiter
        if waiter is not None:
            waiter.wake()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def close(self) -> None:
        """Stop and close the read-model connection."""
        self.stop()
        self.db.close()

    def _with_retries(
        self, batch: Callable[[], int], stopping: Callable[[], bool] | None = None
    ) -> int:
        """``batch()``, waited through database outages; 0 if stopped during one."""
        stopping = stopping or self._stop.is_set
        try:
            return ride_out(
                batch,
                self.outage,
                give_up=stopping,
                sleep=pausing(self._stop),
                before_retry=self._reconnect,
            )
        except Exception as error:
            if stopping() and is_transient(error):
                return 0
            raise

    def _reconnect(self) -> None:
        try:
            self.db.reconnect()
        except Exception as error:  # still down: the next attempt waits again
            if not is_transient(error):
                raise

    def _warn(self, line: str) -> None:
        self._lines.say(line, level=logging.WARNING)

    # -- rebuild and inspection -----------------------------------------------------------

    def rebuild(self) -> int:
        """Project from zero into fresh tables, then swap them in atomically."""
        rebuild_name = f"{NAME}{REBUILD_SUFFIX}"
        self.db.drop(REBUILD_SUFFIX)
        with self.db.transaction():
            self.db.forget(rebuild_name)
        self.db.ensure_schema(REBUILD_SUFFIX)
        total = self.catch_up(name=rebuild_name, suffix=REBUILD_SUFFIX)
        with self.db.transaction():
            self.db.lock_position(NAME)  # live projectors wait while we finish and swap
            while self.process_batch(name=rebuild_name, suffix=REBUILD_SUFFIX):
                pass
            position = self.db.lock_position(rebuild_name)
            self.db.swap_in(REBUILD_SUFFIX)
            self.db.set_position(NAME, position)
            self.db.forget(rebuild_name)
            self._next_expiry = self.db.expire_claims(self._clock())
        return total

    def position(self) -> int:
        """The global position the read models reflect."""
        return self.db.position(NAME)

    def lag(self, *, name: str = NAME) -> int:
        """How many stored events the read models do not reflect yet (up to a million).

        Counted, not subtracted: positions are not dense.
        """
        return self._backend.events_after(self.db.position(name))

    def errors(self) -> list[dict[str, Any]]:
        """Poison events: position, topic, originator and the error."""
        return self.db.query("SELECT * FROM actae_projection_errors ORDER BY position")

    def query(self, statement: str, params: Any = None) -> list[dict[str, Any]]:
        """Run one read-only SQL statement against the read models.

        It runs where it cannot write, on a connection that keeps nothing of it; anything
        else is refused with ``ValidationError`` (field ``statement``) and nothing runs. On
        PostgreSQL it runs as the store's role: give people a role of their own
        (``actae grant-analyst``).
        """
        return self.db.read_only_query(statement, params)
