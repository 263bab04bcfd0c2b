"""Exactly once, counted: each event is applied to the read models once, whoever projects.

Projected changes are absolute upserts, so applying an event twice leaves the same tables;
comparing tables cannot tell once from twice. These tests count applications instead,
through the projector's ``on_batch`` hook (called with the events of each committed batch),
and check that the committed batches follow one another with neither gap nor overlap.

On PostgreSQL, two projectors race for the same batch: the first stops right after it has
read (and locked) the tracking position, until the second has either projected or is seen
waiting for that lock in ``pg_stat_activity``. Without the ``FOR UPDATE`` on the tracking
row, the second reads the same position and applies the same events again.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence

import psycopg
import pytest
from eventsourcing.persistence import ApplicationRecorder, Notification

import actae
from actae.adapters.readside.read_ahead import ReadAhead

TIMEOUT = 30.0


class Applications:
    """Counts, per global position, how often a committed batch applied the event there."""

    def __init__(self) -> None:
        self.batches: list[tuple[int, int]] = []
        self.count: Counter[int] = Counter()
        self._lock = threading.Lock()

    def hook(self, notifications: Sequence[Notification]) -> None:
        with self._lock:
            self.batches.append((notifications[0].id, notifications[-1].id))
            self.count.update(n.id for n in notifications)

    def twice(self) -> list[int]:
        return sorted(position for position, n in self.count.items() if n > 1)


def stored_positions(store: actae.Store) -> list[int]:
    recorder = store._service.recorder
    assert isinstance(recorder, ApplicationRecorder)
    return [n.id for n in recorder.select_notifications(start=1, limit=1_000_000)]


def backlog(store: actae.Store, runs: int, events: int) -> None:
    for r in range(runs):
        run = store.start_run(f"wf-{r}", agent_id="a", state={"r": r})
        for n in range(1, events):
            store.record(run.channel_id, kind="k", payload={"n": n}, expected_cursor=n)


def test_catching_up_in_batches_applies_every_event_once(store: actae.Store) -> None:
    backlog(store, runs=3, events=15)
    projector = store.projector(batch_size=7)
    applied = Applications()
    projector.on_batch = applied.hook

    projector.catch_up()
    projector.catch_up()  # nothing left: applies nothing again

    positions = stored_positions(store)
    assert applied.twice() == []
    assert sorted(applied.count) == positions
    starts = [first for first, _ in applied.batches]
    following = [positions[positions.index(last) + 1] for _, last in applied.batches[:-1]]
    assert starts == [positions[0], *following]  # each batch starts where the last one ended
    assert projector.position() == positions[-1]


def backends_locking(projector: actae.Projector, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The backend each of ``projector``'s locks of its tracking row is taken on, as taken."""
    pids: list[int] = []
    moves = projector.db.move_position

    def locking(name: str, expected: int, position: int) -> int:
        pids.append(projector.db.conn.info.backend_pid)  # type: ignore[attr-defined]
        return moves(name, expected, position)

    monkeypatch.setattr(projector.db, "move_position", locking)
    return pids


def projector_of(store: actae.Store, batch_size: int = 2000) -> actae.Projector:
    """Another projector of ``store``'s read models (on the store's pool, as every one is)."""
    db = store._backend.read_models()
    return actae.Projector(
        store._service, db, store._waiter, backend=store._backend, batch_size=batch_size
    )


def wait_for(condition: Callable[[], bool], pause: threading.Event, what: str) -> None:
    """Poll ``condition`` (in another process's view) until it holds, with a deadline."""
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        pause.wait(0.005)


@pytest.mark.postgres
def test_two_projectors_racing_on_postgres_apply_every_event_once(
    pg_url: str, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with actae.open(pg_url) as store:
        store.start_run("first", agent_id="a", state={})
        store.projector().catch_up()  # the tracking row exists before the race
        projected_before = store.projector().position()
        backlog(store, runs=4, events=10)
        first, second = (projector_of(store) for _ in range(2))
        applied = Applications()
        first.on_batch = second.on_batch = applied.hook
        holding, rival_done = threading.Event(), threading.Event()
        rival: list[BaseException | int] = []
        rival_pids = backends_locking(second, monkeypatch)

        with psycopg.connect(pg_dsn, autocommit=True) as probe:

            def rival_waits_for_a_lock() -> bool:
                if not rival_pids:
                    return False
                row = probe.execute(
                    "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", rival_pids[-1:]
                ).fetchone()
                return row is not None and row[0] == "Lock"

            locked = first.db.move_position
            outcome: list[str] = []

            def lock_then_let_the_rival_try(name: str, expected: int, moved_to: int) -> int:
                position = locked(name, expected, moved_to)
                if not holding.is_set():
                    holding.set()
                    wait_for(
                        lambda: rival_done.is_set() or rival_waits_for_a_lock(),
                        rival_done,
                        "the rival projector to finish or to wait for the tracking row",
                    )
                    outcome.append("rival finished" if rival_done.is_set() else "rival waited")
                return position

            def race() -> None:
                try:
                    assert holding.wait(TIMEOUT)
                    rival.append(second.process_batch())
                except BaseException as error:  # reported by the test thread
                    rival.append(error)
                finally:
                    rival_done.set()

            monkeypatch.setattr(first.db, "move_position", lock_then_let_the_rival_try)
            thread = threading.Thread(target=race)
            thread.start()
            first.process_batch()
            thread.join(TIMEOUT)

        assert not thread.is_alive()
        assert not [r for r in rival if isinstance(r, BaseException)], rival
        first.catch_up()
        second.catch_up()
        for projector in (first, second):
            projector.close()
        positions = stored_positions(store)
        assert applied.twice() == [], "events applied by both projectors"
        assert sorted(applied.count) == [p for p in positions if p > projected_before]
        assert outcome == ["rival waited"]
        assert rival == [0]


@pytest.mark.postgres
def test_a_page_read_ahead_is_not_used_once_another_projector_moved_on(pg_url: str) -> None:
    """A catch-up reads its next page while it applies one (adapters/readside/read_ahead.py);
    if another projector applies that page meanwhile, the page read ahead is dropped."""
    with actae.open(pg_url) as store:
        store.start_run("first", agent_id="a", state={})
        store.projector().catch_up()
        before = store.projector().position()
        backlog(store, runs=2, events=6)
        first, second = (projector_of(store, batch_size=3) for _ in range(2))
        applied = Applications()
        first.on_batch = second.on_batch = applied.hook
        pages = ReadAhead(first._page_after)
        try:
            assert first.process_batch(pages=pages) == 3  # and reads the next 3 ahead
            assert second.process_batch() == 3  # applies those 3 meanwhile
            while first.process_batch(pages=pages):
                pass
        finally:
            pages.close()
            first.db.close()
            second.db.close()
        positions = [p for p in stored_positions(store) if p > before]
        assert applied.twice() == []
        assert sorted(applied.count) == positions
