"""Positions without a lock across commit: the fact they rest on, and the two hard cases.

``adapters/persistence/positions.py`` lets writers commit in any order and bounds every
read by a horizon. These tests check, on a real PostgreSQL:

- the fact the horizon rests on: a write locks the events table, then the sequence, before
  it draws a position, and holds the sequence's lock until it ends;
- a write transaction held open in another database does not delay subscribers (a reader
  bounded by the cluster-wide ``pg_snapshot_xmin`` would wait for it: shown failing);
- a write that drew its position and then waits 2 s before committing is delivered in
  order while later writes commit around it (a reader that skips gaps would lose it:
  shown failing);
- writers do not notify inside their transactions, and readers are still woken.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import psycopg
import pytest
from eventsourcing.persistence import ProgrammingError, StoredEvent
from psycopg import sql

import actae
from actae.adapters.persistence.positions import BLOCK, Horizon, block_bound
from actae.adapters.persistence.postgres import ActaePostgresRecorder

pytestmark = pytest.mark.postgres

DEADLINE = 20.0
HELD = 2.0
"""Seconds the slow write waits between drawing its position and committing."""
QUIET = 1.5
"""Seconds a naive reader is given to show it is stalled (an observation, not a sync)."""


# -- naive readers, to show that each test can fail --------------------------------------


class BelowXmin(Horizon):
    """Final only below every transaction of the *cluster* still running: xmin-bounded."""

    sequence_name = ""

    def advance(self) -> int:
        # The survey takes an xid of its own, later than every xid assigned before it: once
        # the cluster's oldest running xid is past it, every transaction that was running at
        # the survey has ended. (A snapshot's ``xmax`` would not do: it is one past the newest
        # *completed* xid, and a transaction that took its xid later and is still running is
        # above it.)
        ((last_value, is_called, survey),) = self._execute(
            f"SELECT s.last_value, s.is_called, pg_current_xact_id() FROM {self.sequence_name} s",
            (),
        )
        while True:
            ((xmin,),) = self._execute("SELECT pg_snapshot_xmin(pg_current_snapshot())", ())
            if int(str(xmin)) > int(str(survey)):
                break
            time.sleep(0.01)
        self.final = max(self.final, block_bound(last_value, is_called))
        return self.final


class SkipsGaps(Horizon):
    """Takes the last position drawn as final without waiting for writers in flight."""

    def advance(self) -> int:
        ((last_value, is_called, _),) = self._execute(self._survey, ())
        self.final = max(self.final, block_bound(last_value, is_called))
        return self.final


def recorder_of(store: actae.Store) -> ActaePostgresRecorder:
    recorder = store._service.recorder
    assert isinstance(recorder, ActaePostgresRecorder)
    return recorder


def use_reader(store: actae.Store, kind: type[Horizon]) -> None:
    recorder = recorder_of(store)
    horizon = kind(recorder._execute, recorder.sequence(), recorder._table.as_string())
    horizon.sequence_name = recorder.sequence()  # type: ignore[attr-defined]
    recorder._horizon = horizon


class Collected:
    """A global subscription consumed in a thread; the test waits on conditions."""

    def __init__(self, store: actae.Store, after: int) -> None:
        self.sub = store.subscribe(after=after, poll_interval=0.05)
        self.seen: list[actae.ChannelEvent] = []
        self.changed = threading.Condition()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        for event in self.sub:
            with self.changed:
                self.seen.append(event)
                self.changed.notify_all()

    def wait_for(
        self, condition: Callable[[list[actae.ChannelEvent]], bool], timeout: float
    ) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: condition(self.seen), timeout=timeout)

    def close(self) -> None:
        self.sub.stop()
        self.thread.join(DEADLINE)
        self.sub.close()


@pytest.fixture
def store(pg_url: str) -> Iterator[actae.Store]:
    with actae.open(pg_url) as opened:
        yield opened


def kinds(events: list[actae.ChannelEvent]) -> list[str]:
    return [event.kind for event in events if event.kind.startswith("mark-")]


def mark(store: actae.Store, channel_id: uuid.UUID, name: str, cursor: int) -> int:
    return store.record(channel_id, kind=f"mark-{name}", payload={}, expected_cursor=cursor).cursor


# -- the fact -------------------------------------------------------------------------------


def sequence_state(dsn: str, sequence: str) -> tuple[int, bool]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(f"SELECT last_value, is_called FROM {sequence}").fetchone()
    assert row is not None
    return int(row[0]), bool(row[1])


def lock_waiters(dsn: str, relation: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE relation = %s::regclass AND NOT granted",
            (relation,),
        ).fetchone()
    assert row is not None
    return int(row[0])


def until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


@pytest.mark.parametrize("blocker", ["table", "sequence"])
def test_a_write_locks_before_it_draws_a_position(
    store: actae.Store, pg_dsn: str, blocker: str
) -> None:
    """Blocked on the table's lock or the sequence's, a write has drawn nothing yet."""
    run = store.start_run("fact", agent_id="a", state={})
    recorder = recorder_of(store)
    sequence, table = recorder.sequence(), recorder._table.as_string()
    before = sequence_state(pg_dsn, sequence)
    with psycopg.connect(pg_dsn) as holder:
        if blocker == "table":  # conflicts with the INSERT's ROW EXCLUSIVE lock
            holder.execute(f"LOCK TABLE {table} IN EXCLUSIVE MODE")
        else:  # SHARE ROW EXCLUSIVE on the sequence: conflicts with nextval's lock
            holder.execute(f"ALTER SEQUENCE {sequence} CACHE 1")
        writer = threading.Thread(target=mark, args=(store, run.channel_id, "late", 1))
        writer.start()
        until(
            lambda: lock_waiters(pg_dsn, table if blocker == "table" else sequence) > 0,
            "the write to wait",
        )
        assert sequence_state(pg_dsn, sequence) == before  # waiting, it has drawn nothing
        holder.rollback()
    writer.join(DEADLINE)
    assert sequence_state(pg_dsn, sequence)[0] == before[0] + 1


def test_a_write_holds_the_sequences_lock_until_it_ends(store: actae.Store, pg_dsn: str) -> None:
    run = store.start_run("fact", agent_id="a", state={})
    recorder = recorder_of(store)
    drawn, release = threading.Event(), threading.Event()

    def hold() -> None:
        drawn.set()
        release.wait(DEADLINE)

    recorder.before_commit = hold
    writer = threading.Thread(target=mark, args=(store, run.channel_id, "held", 1))
    writer.start()
    assert drawn.wait(DEADLINE)
    ((last_value, is_called, writers),) = recorder._execute(recorder.horizon()._survey, ())
    assert len(writers) == 1  # the write in flight, seen by the horizon's survey
    release.set()
    writer.join(DEADLINE)
    recorder.before_commit = None
    ((_, _, writers),) = recorder._execute(recorder.horizon()._survey, ())
    assert writers == []
    bound = block_bound(last_value, is_called)
    assert bound - BLOCK < (store.events(None)[-1].position or 0) <= bound


# -- hard requirement: another database's long transaction ---------------------------------


@pytest.mark.parametrize(("reader", "sound"), [(Horizon, True), (BelowXmin, False)])
def test_a_long_transaction_in_another_database_does_not_delay_subscribers(
    store: actae.Store, pg_dsn: str, reader: type[Horizon], sound: bool
) -> None:
    """Nor does a transaction here that reads the events and their sequence (as ``pg_dump``
    does) and writes another table."""
    run = store.start_run("live", agent_id="a", state={})
    after = store.position()
    table = recorder_of(store)._table.as_string()
    other = psycopg.conninfo.make_conninfo(pg_dsn, dbname="postgres")
    with (
        psycopg.connect(other) as elsewhere,
        psycopg.connect(pg_dsn) as analyst,
        psycopg.connect(pg_dsn) as cleanup,
    ):
        cleanup.execute(f"DELETE FROM {table} WHERE false")  # an operator's open transaction
        cleanup.execute(f"SELECT last_value FROM {recorder_of(store).sequence()}")
        elsewhere.execute("SELECT pg_current_xact_id()")  # an xid, held open
        analyst.execute(f"SELECT count(*) FROM {table}")  # its lock, held open
        analyst.execute(f"SELECT last_value FROM {recorder_of(store).sequence()}")  # as pg_dump
        analyst.execute("SELECT count(*) FROM pg_sequences")  # its lock on every sequence
        analyst.execute("CREATE TEMP TABLE notes (n int)")
        analyst.execute("INSERT INTO notes VALUES (1)")
        use_reader(store, reader)
        collected = Collected(store, after)
        try:
            mark(store, run.channel_id, "one", 1)
            delivered = collected.wait_for(
                lambda seen: kinds(seen) == ["mark-one"], DEADLINE if sound else QUIET
            )
            assert delivered is sound
        finally:
            elsewhere.rollback()
            analyst.rollback()
            cleanup.rollback()
            collected.close()


# -- hard requirement: a write that commits 2 s after drawing its position ----------------


@pytest.mark.parametrize(("reader", "sound"), [(Horizon, True), (SkipsGaps, False)])
def test_a_slow_commit_is_delivered_in_order_while_later_writes_commit(
    pg_url: str, reader: type[Horizon], sound: bool
) -> None:
    with actae.open(pg_url) as slow, actae.open(pg_url) as fast:
        first = fast.start_run("first", agent_id="a", state={})
        second = fast.start_run("second", agent_id="a", state={})
        after = fast.position()
        use_reader(fast, reader)
        collected = Collected(fast, after)
        drawn = threading.Event()

        def held() -> None:
            drawn.set()
            time.sleep(HELD)  # the injected fault: a commit that takes 2 s to arrive

        recorder_of(slow).before_commit = held
        writer = threading.Thread(target=mark, args=(slow, first.channel_id, "slow", 1))
        writer.start()
        try:
            assert drawn.wait(DEADLINE)
            cursor = mark(fast, second.channel_id, "fast-1", 1)
            mark(fast, second.channel_id, "fast-2", cursor)
            assert collected.wait_for(lambda seen: "mark-fast-2" in kinds(seen), DEADLINE)
            writer.join(DEADLINE)
            every = [e for e in fast.events(None, after=after) if e.kind.startswith("mark-")]
            assert [e.kind for e in every] == ["mark-slow", "mark-fast-1", "mark-fast-2"]
            positions = [e.position or 0 for e in collected.seen]
            assert positions == sorted(positions)
            assert (kinds(collected.seen) == kinds(every)) is sound
        finally:
            writer.join(DEADLINE)
            collected.close()


# -- waking readers -----------------------------------------------------------------------


def test_writes_notify_no_one(pg_url: str, pg_dsn: str) -> None:
    """No NOTIFY in the insert, and none beside it (on the channel eventsourcing would use).

    Other stores on the server may notify on it: only this store's sessions count.
    """
    name = f"quiet-{uuid.uuid4().hex[:8]}"
    with actae.open(f"{pg_url}&application_name={name}") as store:
        recorder = recorder_of(store)
        statement = recorder.insert_statement(1)
        assert "notify" not in statement.lower()
        assert "advisory" not in statement.lower()
        with psycopg.connect(pg_dsn, autocommit=True) as listener:
            listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(recorder.channel_name)))
            store.start_run("quiet", agent_id="a", state={})
            heard = list(listener.notifies(timeout=QUIET))
            sessions = listener.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (name,)
            ).fetchall()
        assert sessions
        assert {notify.pid for notify in heard} & {pid for (pid,) in sessions} == set()


def test_another_process_s_write_reaches_an_idle_subscriber_within_its_poll_interval(
    pg_url: str,
) -> None:
    with actae.open(pg_url) as reading, actae.open(pg_url) as writing:
        run = writing.start_run("idle", agent_id="a", state={})
        collected = Collected(reading, reading.position())
        try:
            mark(writing, run.channel_id, "early", 1)
            assert collected.wait_for(lambda seen: kinds(seen) == ["mark-early"], DEADLINE)
            written = time.monotonic()
            mark(writing, run.channel_id, "late", 2)
            assert collected.wait_for(lambda seen: "mark-late" in kinds(seen), DEADLINE)
            assert time.monotonic() - written < 1.0  # poll_interval 0.05 s, plus one look
        finally:
            collected.close()


def test_a_write_of_more_events_than_a_block_is_refused(store: actae.Store) -> None:
    recorder = recorder_of(store)
    events = [StoredEvent(uuid.uuid4(), 1, "t", b"{}") for _ in range(BLOCK + 1)]
    with pytest.raises(ProgrammingError, match="at most"):
        recorder.insert_events(events)
    for count in (1, 64, 65, BLOCK):  # scalars up to 64 events, arrays beyond
        positions = list(recorder.insert_events(events[:count]) or [])
        assert positions[0] % BLOCK == 0
        assert positions == list(range(positions[0], positions[0] + count))
        events = [StoredEvent(uuid.uuid4(), 1, "t", b"{}") for _ in range(BLOCK + 1)]


def test_a_sequence_that_caches_values_is_refused(pg_url: str, pg_dsn: str) -> None:
    with actae.open(pg_url) as store:
        sequence = recorder_of(store).sequence()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"ALTER SEQUENCE {sequence} CACHE 20")
    with actae.open(pg_url) as store, pytest.raises(ProgrammingError, match="CACHE 1"):
        store.start_run("cached", agent_id="a", state={})


def test_a_horizon_raised_by_another_reader_meanwhile_skips_nothing(store: actae.Store) -> None:
    """A reader reads the cached horizon once: another thread may raise it mid-read."""
    run = store.start_run("race", agent_id="a", state={})
    recorder = recorder_of(store)
    horizon = recorder.horizon()
    first = store.position()  # the horizon now ends at the block of the run's start
    cursor = mark(store, run.channel_id, "below", 1)  # in a block above that horizon
    between = recorder._notifications_between

    def racing(lower: int, upper: int, topics: Any, limit: int) -> Any:
        found = between(lower, upper, topics, limit)
        mark(store, run.channel_id, "above", cursor)  # written, then seen by another reader
        horizon.advance()
        recorder._notifications_between = between  # type: ignore[method-assign]
        return found

    recorder._notifications_between = racing  # type: ignore[method-assign]
    seen = recorder.select_notifications(first + 1 - BLOCK, 100)  # history: below the known
    kinds_seen = [orjson.loads(n.state).get("kind") for n in seen]
    assert "mark-below" in kinds_seen


def test_history_is_read_without_asking_the_horizon_again(store: actae.Store) -> None:
    """Catching up below the horizon costs one survey, not one per page."""
    run = store.start_run("history", agent_id="a", state={})
    cursor = 1
    for n in range(30):
        cursor = mark(store, run.channel_id, f"h{n}", cursor)
    recorder = recorder_of(store)
    horizon = recorder.horizon()
    surveys: list[Any] = []
    real = horizon.advance

    def counted() -> int:
        surveys.append(1)
        return real()

    horizon.advance = counted  # type: ignore[method-assign]
    position, pages = 0, 0
    while page := recorder.select_notifications(position + 1, 5):
        position, pages = page[-1].id, pages + 1
    assert pages >= 6
    assert len(surveys) <= 3  # the first page, the last one and the empty read after it


def test_a_reader_following_live_surveys_once_and_reads_once_per_page(store: actae.Store) -> None:
    """At the live end a page starts a block below the known horizon: a new one comes first."""
    run = store.start_run("live", agent_id="a", state={})
    recorder = recorder_of(store)
    position = 0
    while page := recorder.select_notifications(position + 1, 100):
        position = page[-1].id
    horizon, between = recorder.horizon(), recorder._notifications_between
    calls: list[str] = []
    survey = horizon.advance

    def surveyed() -> int:
        calls.append("survey")
        return survey()

    def read(lower: int, upper: int, topics: Any, limit: int) -> Any:
        calls.append("read")
        return between(lower, upper, topics, limit)

    horizon.advance = surveyed  # type: ignore[method-assign]
    recorder._notifications_between = read  # type: ignore[method-assign]
    cursor = 1
    for n in range(3):
        cursor = mark(store, run.channel_id, f"live{n}", cursor)
        calls.clear()
        page = recorder.select_notifications(position + 1, 100)
        assert [orjson.loads(e.state)["kind"] for e in page] == [f"mark-live{n}"]
        assert calls == ["survey", "read"]
        position = page[-1].id
