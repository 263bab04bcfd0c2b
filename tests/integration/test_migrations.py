"""The store schema is versioned, created once under a lock, and never misread."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import psycopg
import pytest
from eventsourcing.persistence import IntegrityError, StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore

import actae
from actae.adapters.persistence import migrations
from actae.adapters.persistence.migrations import MIGRATIONS, SchemaVersionError

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

    with pytest.raises(SchemaVersionError, match="schema version 3 but this Actae knows only up"):
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
        conn.execute(f'DELETE FROM "{schema}".actae_migrations WHERE version = 3')

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


@pytest.mark.postgres
def test_the_position_migration_gives_up_behind_a_long_reader_and_is_retried(
    pg_url: str, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its ALTER takes the table's exclusive lock: it must not queue every statement on the
    table behind a reader for as long as that reader lasts."""
    actae.open(pg_url).close()
    schema = pg_url.rsplit("schema=", 1)[1]
    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # back to version 2
        conn.execute(f'DELETE FROM "{schema}".actae_migrations WHERE version = 3')
    monkeypatch.setattr(migrations, "LOCK_TIMEOUT", "200ms")
    outcome: list[object] = []

    def try_to_open() -> None:
        try:
            actae.open(pg_url).close()
            outcome.append("opened")
        except Exception as error:  # reported by the test thread
            outcome.append(error)

    with psycopg.connect(pg_dsn) as reader:
        reader.execute(f'SELECT count(*) FROM "{schema}".actae_events')  # holds its lock
        opener = threading.Thread(target=try_to_open)
        opener.start()
        opener.join(5.0)  # a deadline: 200 ms is the expected wait
        reader.rollback()  # lets an open that would have waited finish
    opener.join(30.0)
    assert len(outcome) == 1
    assert isinstance(outcome[0], psycopg.errors.LockNotAvailable), outcome
    with actae.open(pg_url) as store:  # the next open migrates
        store.start_run("wf", agent_id="a", state={})
    with psycopg.connect(pg_dsn) as conn:
        versions = conn.execute(f'SELECT version FROM "{schema}".actae_migrations').fetchall()
    assert versions == [(m.version,) for m in MIGRATIONS]
