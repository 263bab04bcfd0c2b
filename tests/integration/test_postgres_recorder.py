"""eventsourcing's own recorder test cases, run against Actae's PostgreSQL recorder.

``ActaePostgresRecorder`` replaces the stock recorder's write and read statements (one
autocommitted statement per write, a block of positions per write instead of the table
lock, reads bounded by the positions' horizon). These are the library's contract tests for
any application recorder: insert and select, subscriptions that see every event,
concurrent writers without conflicts, and two concurrent batches that never interleave
their positions. (The aggregate-recorder
case does not apply: it expects a recorder that returns no positions.)
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

import psycopg
import pytest
from eventsourcing.persistence import Notification, StoredEvent
from eventsourcing.postgres import PostgresDatastore
from eventsourcing.tests.persistence import (
    ApplicationRecorderTestCase,
    NonInterleavingNotificationIDsBaseCase,
)
from psycopg import sql

import actae
from actae.adapters.persistence.postgres import ActaePostgresRecorder
from tests.helpers import private_overrides

pytestmark = pytest.mark.postgres


class FreshRecorders:
    """Each ``create_recorder()`` gets an empty store's tables in a schema of its own."""

    dsn: str
    schemas: list[str]
    datastores: list[PostgresDatastore]

    def create_recorder(self) -> ActaePostgresRecorder:
        schema = f"es_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        self.schemas.append(schema)
        info = psycopg.conninfo.conninfo_to_dict(self.dsn)
        datastore = PostgresDatastore(
            dbname=str(info["dbname"]),
            host=str(info.get("host", "127.0.0.1")),
            port=str(info.get("port", "5432")),
            user=str(info.get("user", "postgres")),
            password=str(info.get("password", "")),
            schema=schema,
            pool_size=4,
        )
        self.datastores.append(datastore)
        recorder = ActaePostgresRecorder(datastore, events_table_name="actae_events")
        recorder.create_table()  # the store's migrations
        return recorder


@pytest.fixture(autouse=True)
def _fresh_schemas(request: pytest.FixtureRequest, pg_dsn: str) -> Iterator[None]:
    case = request.instance
    if case is None:  # a plain test function, not one of the contract cases
        yield
        return
    case.dsn, case.schemas, case.datastores = pg_dsn, [], []
    yield
    for datastore in case.datastores:
        datastore.close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for schema in case.schemas:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


class TestApplicationRecorderContract(FreshRecorders, ApplicationRecorderTestCase):
    """Notifications, subscriptions and concurrent writers.

    Its ``test_insert_select`` expects the positions 1, 2, 3 that a lock around commit
    would issue; Actae's writes take blocks of positions instead
    (``adapters/persistence/positions.py``). That case runs on :class:`Ranked`, which
    numbers the positions issued 1, 2, 3, … and translates each call, so every query shape
    it checks (start, stop, limit, topics, inclusive or not) runs on the real positions.
    """

    def create_recorder(self) -> Any:
        if self._testMethodName == "test_insert_select":
            return Ranked(super().create_recorder())
        return super().create_recorder()


class Ranked:
    """A recorder whose positions are shown as ranks: the n-th position issued is ``n``."""

    def __init__(self, recorder: ActaePostgresRecorder) -> None:
        self.recorder = recorder
        self.issued: list[int] = []

    def insert_events(self, events: Sequence[StoredEvent], **kwargs: Any) -> list[int]:
        positions = list(self.recorder.insert_events(events, **kwargs) or [])
        assert positions == list(range(positions[0], positions[0] + len(positions)))
        assert not self.issued or positions[0] > self.issued[-1]
        self.issued.extend(positions)
        return [self.issued.index(p) + 1 for p in positions]

    def select_events(self, *args: Any, **kwargs: Any) -> Any:
        return self.recorder.select_events(*args, **kwargs)

    def select_notifications(
        self,
        start: int | None,
        limit: int,
        stop: int | None = None,
        topics: Sequence[str] = (),
        *,
        inclusive_of_start: bool = True,
    ) -> list[Notification]:
        found = self.recorder.select_notifications(
            None if start is None else self.issued[start - 1],
            limit,
            None if stop is None else self.issued[stop - 1],
            topics,
            inclusive_of_start=inclusive_of_start,
        )
        return [replace(n, id=self.issued.index(n.id) + 1) for n in found]

    def max_notification_id(self) -> int | None:
        top = self.recorder.max_notification_id()
        return None if top is None else self.issued.index(top) + 1


class TestNonInterleavingPositions(FreshRecorders, NonInterleavingNotificationIDsBaseCase):
    """Two concurrent batches of 1,000 events get two unbroken runs of positions."""


def test_a_lone_writer_keeps_its_connection(pg_url: str) -> None:
    """Successive uncontended statements reuse one server process (persistence/postgres.py)."""
    with actae.open(pg_url + "&pool_size=4") as store:
        recorder = store._service.recorder
        assert isinstance(recorder, ActaePostgresRecorder)
        pids = {recorder._execute("SELECT pg_backend_pid()", [])[0][0] for _ in range(6)}
        assert len(pids) == 1


def test_a_pool_of_one_keeps_nothing_back(pg_url: str) -> None:
    """With one connection in all, keeping it would starve the pool's other users (a purge
    deletes through eventsourcing's own checkout)."""
    clock = actae.ManualClock()
    url = pg_url + "&pool_size=1&max_overflow=0&connect_timeout=2"
    with actae.open(url, clock=clock) as store:
        run = store.start_run("one", agent_id="a", state={})
        store.complete_run(run.run_id, {"done": True})
        store.set_retention({"completed": "1h"}, actor="ops")
        clock.advance(2 * 3600)
        started = time.monotonic()
        assert store.apply_retention(actor="ops").purged == [run.run_id]
        assert time.monotonic() - started < 10  # it did not wait for a connection kept back
        assert store.position() >= 1


def test_writes_survive_the_server_dropping_every_pooled_connection(
    pg_url: str, pg_dsn: str
) -> None:
    """A write on a dead connection is retried on a new one and reported exactly once."""
    with actae.open(pg_url + "&pool_size=2") as store:
        recorder = store._service.recorder
        assert isinstance(recorder, ActaePostgresRecorder)
        run = store.start_run("w", agent_id="a", state={"n": 0})
        with (
            recorder.datastore.get_connection() as first,
            recorder.datastore.get_connection() as second,
        ):
            pids = [first.info.backend_pid, second.info.backend_pid]
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            for pid in pids:
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        receipt = store.transition(
            run.channel_id,
            kind="step",
            payload={},
            state={"n": 1},
            expected_version=1,
            expected_cursor=1,
            operation_id="after-the-drop",
        )
        assert (receipt.cursor, receipt.replayed) == (2, False)
        assert [e.cursor for e in store.events(run.channel_id)] == [1, 2]


def test_select_together_answers_each_request_in_one_statement(pg_url: str) -> None:
    """All events of one aggregate, the last of another, nothing for an unknown id."""
    with actae.open(pg_url) as store:
        recorder = store._service.recorder
        assert isinstance(recorder, ActaePostgresRecorder)
        run = store.start_run("t", agent_id="a", state={}, operation_id="start:t")
        head = store.head(run.channel_id)
        for n in range(3):
            head = store.record(
                run.channel_id, kind="k", payload={"n": n}, expected_cursor=head.cursor
            )
        store.pause(run.run_id, actor="ops", reason="check")
        run_events, channel_head, nothing = recorder.select_together(
            [(run.run_id, False), (run.channel_id, True), (uuid.uuid4(), False)]
        )
        assert run_events == list(recorder.select_events(run.run_id))
        assert len(run_events) >= 2
        assert channel_head == list(recorder.select_events(run.channel_id, desc=True, limit=1))
        assert nothing == []


def test_run_and_operation_in_one_read_equal_the_two_reads(pg_url: str) -> None:
    with actae.open(pg_url) as store:
        reader = store._service.reader
        run = store.start_run("t", agent_id="a", state={})
        store.record(run.channel_id, kind="k", payload={}, expected_cursor=1, operation_id="op-1")
        for operation_id in ("op-1", "never-ran", None):
            info, operation = reader.run_and_operation(run.run_id, run.channel_id, operation_id)
            assert info == reader.run(run.run_id)
            expected = reader.operation(operation_id)
            assert (operation and operation.recorded_result) == (
                expected and expected.recorded_result
            )


def test_no_private_method_of_eventsourcing_is_overridden() -> None:
    from eventsourcing.postgres import PostgresApplicationRecorder

    assert private_overrides(ActaePostgresRecorder, PostgresApplicationRecorder) == []


def test_a_connection_that_forgot_the_insert_prepares_it_again(pg_url: str) -> None:
    with actae.open(pg_url) as store:
        run = store.start_run("wf", agent_id="a", state={})
        recorder: Any = store._service.recorder
        head = store.record(run.channel_id, kind="first", payload={}, expected_cursor=1)
        conn = recorder.kept.take()  # the connection the first write used and prepared
        try:
            name = recorder._direct_statement(1)[0].decode()
            conn.execute(f'DEALLOCATE "{name}"')  # as DISCARD ALL or a pooler would
        finally:
            recorder.kept.give_back(conn)
        store.record(run.channel_id, kind="second", payload={}, expected_cursor=head.cursor)
        assert [e.kind for e in store.events(run.channel_id)] == ["run.started", "first", "second"]


def test_a_connection_in_another_encoding_writes_text_as_it_reads_it(pg_url: str) -> None:
    """The direct write's text is UTF-8; a connection in another encoding goes through psycopg."""
    with actae.open(pg_url + "&options=-c%20client_encoding%3DLATIN1") as store:
        run = store.start_run("wf", agent_id="a", state={})
        first = store.record(
            run.channel_id, kind="k", payload={}, expected_cursor=1, operation_id="café-1"
        )
        again = store.record(
            run.channel_id, kind="k", payload={}, expected_cursor=1, operation_id="café-1"
        )
        assert again.replayed
        assert again.cursor == first.cursor
        assert store.operation("café-1") is not None
