"""The store schema is versioned, created once under a lock, and never misread."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import uuid
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest
from eventsourcing.persistence import IntegrityError, OperationalError, StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore

import actae
from actae.adapters.persistence import migrations
from actae.adapters.persistence.migrations import MIGRATIONS, SchemaVersionError
from actae.domain.channel import Channel, ChannelHead
from actae.domain.operation import Operation
from actae.domain.validation import fingerprint
from actae.domain.values import Receipt

OPEN_AND_WRITE = """
import sys, actae
url = sys.argv[1]
print("ready", flush=True)
sys.stdin.readline()
with actae.open(url) as store:
    run = store.start_run("wf", agent_id="a", state={})
    print(run.run_id, flush=True)
"""


@pytest.mark.postgres
def test_many_processes_open_a_fresh_postgres_store_at_once(pg_url: str, pg_dsn: str) -> None:
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", OPEN_AND_WRITE, pg_url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    for process in processes:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "ready"
    for process in processes:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    run_ids = []
    for process in processes:
        out, err = process.communicate(timeout=60)
        assert process.returncode == 0, err
        run_ids.append(out.strip())

    schema = pg_url.rsplit("schema=", 1)[1]
    with psycopg.connect(pg_dsn) as conn:
        rows = conn.execute(f'SELECT version FROM "{schema}".actae_migrations').fetchall()
    assert rows == [(m.version,) for m in MIGRATIONS]  # each applied once
    with actae.open(pg_url) as store:
        assert {str(store.run(r).run_id) for r in run_ids} == set(run_ids)


def test_sqlite_records_its_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    actae.open(f"sqlite:///{path}").close()
    actae.open(f"sqlite:///{path}").close()

    with sqlite3.connect(path) as db:
        versions = db.execute("SELECT version FROM actae_migrations ORDER BY version").fetchall()
        assert versions == [(m.version,) for m in MIGRATIONS]


def test_a_store_from_a_newer_actae_is_refused(durable_url: str) -> None:
    actae.open(durable_url).close()
    if durable_url.startswith("sqlite"):
        with sqlite3.connect(durable_url.removeprefix("sqlite:///")) as db:
            db.execute("INSERT INTO actae_migrations (version, name) VALUES (999, 'future')")
    else:
        dsn, schema = durable_url.rsplit("?schema=", 1)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                f"INSERT INTO \"{schema}\".actae_migrations (version, name) VALUES (999, 'f')"
            )

    with pytest.raises(SchemaVersionError, match="schema version 999"):
        actae.open(durable_url)


def test_an_actae_from_before_block_positions_refuses_the_store(
    durable_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its writers would draw positions readers do not wait for: it must not open the store."""
    actae.open(durable_url).close()
    monkeypatch.setattr(migrations, "LATEST", 2)  # what the previous release knew

    latest = MIGRATIONS[-1].version
    with pytest.raises(SchemaVersionError, match=f"schema version {latest} but this Actae knows"):
        actae.open(durable_url)


@pytest.mark.postgres
def test_a_stock_eventsourcing_writer_fails_loudly_on_a_postgres_store(
    pg_url: str, pg_dsn: str
) -> None:
    """eventsourcing's own recorder leaves positions to the column's default: there is none."""
    with actae.open(pg_url) as store:
        store.start_run("wf", agent_id="a", state={})
        before = store.events(None)
    schema = pg_url.rsplit("schema=", 1)[1]
    info = psycopg.conninfo.conninfo_to_dict(pg_dsn)
    datastore = PostgresDatastore(
        str(info["dbname"]),
        str(info["host"]),
        str(info["port"]),
        str(info["user"]),
        "",
        schema=schema,
    )
    stock = PostgresApplicationRecorder(datastore, events_table_name="actae_events")
    event = StoredEvent(
        originator_id=uuid.uuid4(), originator_version=1, topic="stock:Event", state=b"{}"
    )
    try:
        with pytest.raises(IntegrityError, match="notification_id"):
            stock.insert_events([event])
    finally:
        datastore.close()
    with actae.open(pg_url) as store:
        assert store.events(None) == before


@pytest.mark.postgres
def test_a_store_from_before_block_positions_is_upgraded_in_place(pg_url: str, pg_dsn: str) -> None:
    with actae.open(pg_url) as store:
        run = store.start_run("wf", agent_id="a", state={})
        first = store.position()
    schema = pg_url.rsplit("schema=", 1)[1]
    table = f'"{schema}".actae_events'
    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # as version 2 left it
        conn.execute(
            f"ALTER TABLE {table} ALTER COLUMN notification_id SET DEFAULT "
            f"nextval('\"{schema}\".actae_events_notification_id_seq'::regclass)"
        )
        conn.execute(f'DELETE FROM "{schema}".actae_migrations WHERE version >= 3')

    with actae.open(pg_url) as store:
        store.record(run.channel_id, kind="after", payload={}, expected_cursor=1)
        assert store.position() > first
    with psycopg.connect(pg_dsn) as conn:
        default = conn.execute(
            "SELECT column_default FROM information_schema.columns WHERE table_schema = %s"
            " AND table_name = 'actae_events' AND column_name = 'notification_id'",
            (schema,),
        ).fetchone()
        versions = conn.execute(f'SELECT version FROM "{schema}".actae_migrations').fetchall()
    assert default == (None,)
    assert versions == [(m.version,) for m in MIGRATIONS]


def _opened_behind_a_reader(url: str, dsn: str) -> object:
    """What ``actae.open(url)`` ends with while a reader holds the events table's lock:
    "opened", or the error it raised (the reader lets go after 5 s at the latest)."""
    schema = url.rsplit("schema=", 1)[1]
    outcome: list[object] = []

    def try_to_open() -> None:
        try:
            actae.open(url).close()
            outcome.append("opened")
        except Exception as error:  # reported by the test thread
            outcome.append(error)

    with psycopg.connect(dsn) as reader:
        reader.execute(f'SELECT count(*) FROM "{schema}".actae_events')  # holds its lock
        opener = threading.Thread(target=try_to_open)
        opener.start()
        opener.join(5.0)  # a deadline: 200 ms is the expected wait
        reader.rollback()  # lets an open that would have waited finish
    opener.join(30.0)
    assert len(outcome) == 1
    return outcome[0]


@pytest.mark.postgres
def test_the_position_migration_gives_up_behind_a_long_reader_and_is_retried(
    pg_url: str, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its ALTER takes the table's exclusive lock: it must not queue every statement on the
    table behind a reader for as long as that reader lasts."""
    actae.open(pg_url).close()
    schema = pg_url.rsplit("schema=", 1)[1]
    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # back to version 2
        conn.execute(f'DELETE FROM "{schema}".actae_migrations WHERE version >= 3')
    monkeypatch.setattr(migrations, "LOCK_TIMEOUT", "200ms")
    outcome = _opened_behind_a_reader(pg_url, pg_dsn)
    assert isinstance(outcome, psycopg.errors.LockNotAvailable), outcome
    with actae.open(pg_url) as store:  # the next open migrates
        store.start_run("wf", agent_id="a", state={})
    with psycopg.connect(pg_dsn) as conn:
        versions = conn.execute(f'SELECT version FROM "{schema}".actae_migrations').fetchall()
    assert versions == [(m.version,) for m in MIGRATIONS]


def _write_as_version_3(store: actae.Store, run: actae.RunInfo, operation_id: str) -> Receipt:
    """A record under ``operation_id`` as schema version 3 wrote it: the channel event, and
    its operation record as an Operation aggregate's first row, no id in any column."""
    service = store._service
    head = ChannelHead.of(service.reader.head_event(run.channel_id))
    at = service.clock()
    body = service.core.document("payload", {"amount": 1})
    event = Channel.recorded(head, kind="k", payload=body.value, operation_id=operation_id, at=at)
    record = Operation.executed(
        operation_id=operation_id,
        command="record",
        fingerprint=fingerprint("record", str(run.channel_id), "k", body.checksum),
        result={"cursor": event.originator_version, "state_version": event.state_version},
        at=at,
    )
    service.recorder.insert_events([service.mapper.to_stored_event(e) for e in (event, record)])
    return Receipt(
        channel_id=run.channel_id,
        cursor=event.originator_version,
        state_version=event.state_version,
        operation_id=operation_id,
    )


def _drop_the_check(url: str) -> None:
    """Drop the check that refuses version 3's records (a trigger on SQLite)."""
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
            db.execute("DROP TRIGGER stored_events_records_carry_ids")
        return
    dsn, schema = url.rsplit("?schema=", 1)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            f'ALTER TABLE "{schema}".actae_events DROP CONSTRAINT actae_events_records_carry_ids'
        )


def _back_to_version_3(url: str) -> None:
    """Drop migration 4's column with its index, and its line in the migrations table."""
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
            db.execute("DROP INDEX stored_events_operation_id")
            db.execute("ALTER TABLE stored_events DROP COLUMN operation_id")
            db.execute("DELETE FROM actae_migrations WHERE version >= 4")
        return
    dsn, schema = url.rsplit("?schema=", 1)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'ALTER TABLE "{schema}".actae_events DROP COLUMN operation_id')
        conn.execute(f'DELETE FROM "{schema}".actae_migrations WHERE version >= 4')


def test_a_process_from_before_migration_4_cannot_write_a_record(durable_url: str) -> None:
    """Its record would carry no id, which the unique index cannot see: it is refused."""
    with actae.open(durable_url) as store:
        run = store.start_run("wf", agent_id="a", state={})
        with pytest.raises(IntegrityError, match=r"records_carry_ids|operation_id"):
            _write_as_version_3(store, run, "old-writer")
        assert store.operation("old-writer") is None
        assert store.head(run.channel_id).cursor == 1


def test_records_from_before_migration_4_still_refuse_a_second_execution(
    durable_url: str,
) -> None:
    """The migration copies their ids into the column before the unique index exists."""
    with actae.open(durable_url) as store:
        run = store.start_run("wf", agent_id="a", state={})
        _drop_the_check(durable_url)
        original = _write_as_version_3(store, run, "legacy")
        store.claim("legacy-effect", run_id=run.run_id, worker="w", lease=30.0, request={})
    _back_to_version_3(durable_url)

    with actae.open(durable_url) as store:
        head = store.head(run.channel_id)
        again = store.record(
            run.channel_id,
            kind="k",
            payload={"amount": 1},
            expected_cursor=head.cursor,
            operation_id="legacy",
        )
        assert again == replace(original, replayed=True)
        with pytest.raises(actae.OperationConflictError):
            store.record(
                run.channel_id,
                kind="k",
                payload={"amount": 2},
                expected_cursor=head.cursor,
                operation_id="legacy",
            )
        for used in ("legacy", "legacy-effect"):
            with pytest.raises(actae.OperationConflictError):
                store.start_run("wf-2", agent_id="a", state={}, operation_id=used)
        assert store.operation("legacy") == actae.OperationRecord(
            operation_id="legacy", command="record", result={"cursor": 2, "state_version": 1}
        )
        assert store.head(run.channel_id) == head


@pytest.mark.postgres
def test_migration_4_gives_up_behind_a_long_reader_and_is_retried(
    pg_url: str, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Adding the column takes the table's exclusive lock: never wait for it indefinitely."""
    with actae.open(pg_url) as store:
        run = store.start_run("wf", agent_id="a", state={})
    _back_to_version_3(pg_url)
    schema = pg_url.rsplit("schema=", 1)[1]
    monkeypatch.setattr(migrations, "LOCK_TIMEOUT", "200ms")
    outcome = _opened_behind_a_reader(pg_url, pg_dsn)
    assert isinstance(outcome, OperationalError), outcome
    assert "lock timeout" in str(outcome)
    with actae.open(pg_url) as store:  # the next open migrates
        store.record(run.channel_id, kind="k", payload={}, expected_cursor=1, operation_id="o")
        assert store.operation("o") is not None
    with psycopg.connect(pg_dsn) as conn:
        versions = conn.execute(f'SELECT version FROM "{schema}".actae_migrations').fetchall()
    assert versions == [(m.version,) for m in MIGRATIONS]
