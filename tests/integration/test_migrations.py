"""The store schema is versioned, created once under a lock, and never misread.

Each backend has one list of migrations (version 1 is the baseline); an open applies the
missing ones once, in a turn; a store from a newer Actae is refused; the migrated schema is
the one the code defines.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import uuid
from hashlib import sha256
from pathlib import Path
from typing import Any

import psycopg
import pytest
from eventsourcing.persistence import IntegrityError, ProgrammingError, StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore

import actae
from actae.adapters.persistence import migrations
from actae.adapters.persistence.migrations import (
    POSTGRES_MIGRATIONS,
    SQLITE_MIGRATIONS,
    Migration,
    SchemaVersionError,
)
from actae.adapters.readside.readmodels import PostgresReadModels, SqliteReadModels
from actae.projections.tables import TABLES

OPEN_AND_WRITE = """
import sys, actae
url = sys.argv[1]
print("ready", flush=True)
sys.stdin.readline()
with actae.open(url) as store:
    run = store.start_run("wf", agent_id="a", state={})
    print(run.run_id, flush=True)
"""
PROBE = "actae_probe"


def versions(url: str) -> list[tuple[int]]:
    """The versions the store's migrations table records, in order."""
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
            return db.execute("SELECT version FROM actae_migrations ORDER BY version").fetchall()
    dsn, schema = url.rsplit("?schema=", 1)
    with psycopg.connect(dsn) as conn:
        return conn.execute(
            f'SELECT version FROM "{schema}".actae_migrations ORDER BY version'
        ).fetchall()


def every_version(migrations_of: tuple[Migration, ...]) -> list[tuple[int]]:
    return [(version,) for version in range(1, len(migrations_of) + 1)]


def listed(url: str) -> tuple[Migration, ...]:
    """The backend's list as the open sees it (a test may have appended to it)."""
    if url.startswith("sqlite"):
        return migrations.SQLITE_MIGRATIONS
    return migrations.POSTGRES_MIGRATIONS


def with_a_probe(url: str, monkeypatch: pytest.MonkeyPatch, statement: str) -> None:
    """Append a migration, as a later release would, to this backend's list."""
    name = "SQLITE_MIGRATIONS" if url.startswith("sqlite") else "POSTGRES_MIGRATIONS"
    monkeypatch.setattr(migrations, name, (*listed(url), Migration("a probe", (statement,))))


@pytest.mark.postgres
def test_many_processes_open_a_fresh_postgres_store_at_once(pg_url: str) -> None:
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

    assert versions(pg_url) == every_version(POSTGRES_MIGRATIONS)  # each applied once
    with actae.open(pg_url) as store:
        assert {str(store.run(r).run_id) for r in run_ids} == set(run_ids)


def test_sqlite_records_its_schema_version(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    actae.open(url).close()
    actae.open(url).close()

    assert versions(url) == every_version(SQLITE_MIGRATIONS)


def test_a_store_from_a_newer_actae_is_refused(durable_url: str) -> None:
    actae.open(durable_url).close()
    future = len(listed(durable_url)) + 1
    if durable_url.startswith("sqlite"):
        with sqlite3.connect(durable_url.removeprefix("sqlite:///")) as db:
            db.execute("INSERT INTO actae_migrations (version, name) VALUES (?, 'f')", (future,))
    else:
        dsn, schema = durable_url.rsplit("?schema=", 1)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                f"INSERT INTO \"{schema}\".actae_migrations (version, name) VALUES (%s, 'f')",
                (future,),
            )

    with pytest.raises(SchemaVersionError, match=f"schema version {future} but this Actae"):
        actae.open(durable_url)


def test_a_migration_appended_later_is_applied_once_to_an_existing_store(
    durable_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with actae.open(durable_url) as store:
        run = store.start_run("wf", agent_id="a", state={})
    schema = "" if durable_url.startswith("sqlite") else "{schema}."
    with_a_probe(durable_url, monkeypatch, f"CREATE TABLE {schema}{PROBE} (n integer)")

    for _ in range(2):  # the second open finds it applied: the CREATE would fail if run again
        with actae.open(durable_url) as store:
            assert store.run(run.run_id).run_id == run.run_id

    assert versions(durable_url) == every_version(listed(durable_url))
    assert len(listed(durable_url)) == 2


def test_a_failing_migration_leaves_the_store_as_it_was(
    durable_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    actae.open(durable_url).close()
    with_a_probe(durable_url, monkeypatch, "CREATE TABLE nowhere.at_all (n integer)")

    with pytest.raises(Exception, match="nowhere"):
        actae.open(durable_url)

    assert versions(durable_url) == [(1,)]


@pytest.mark.postgres
def test_a_migration_gives_up_behind_a_long_reader_and_is_retried(
    pg_url: str, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A statement that needs a table's exclusive lock must not queue every statement on the
    table behind a reader for as long as that reader lasts: it waits LOCK_TIMEOUT at most."""
    actae.open(pg_url).close()
    schema = pg_url.rsplit("schema=", 1)[1]
    with_a_probe(pg_url, monkeypatch, "ALTER TABLE {schema}.actae_events ADD COLUMN probe text")
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
    assert versions(pg_url) == [(1,)]
    actae.open(pg_url).close()  # the next open migrates
    assert versions(pg_url) == [(1,), (2,)]


@pytest.mark.postgres
def test_a_writer_that_leaves_positions_to_the_table_fails_loudly(pg_url: str, pg_dsn: str) -> None:
    """eventsourcing's own recorder leaves positions to the column's default: there is none,
    so it cannot write positions the readers would not wait for (Actae's writers draw them
    in blocks). It lacks its composite type too."""
    with actae.open(pg_url) as store:
        store.start_run("wf", agent_id="a", state={})
        before = store.events(None)
    schema = pg_url.rsplit("schema=", 1)[1]
    with psycopg.connect(pg_dsn) as conn, pytest.raises(psycopg.errors.NotNullViolation):
        conn.execute(
            f'INSERT INTO "{schema}".actae_events'
            " (originator_id, originator_version, topic, state) VALUES (%s, 1, 'x', '{}')",
            (uuid.uuid4(),),
        )
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
    event = StoredEvent(uuid.uuid4(), 1, "stock:Event", b"{}")
    try:
        with pytest.raises((IntegrityError, ProgrammingError)):
            stock.insert_events([event])
    finally:
        datastore.close()
    with actae.open(pg_url) as store:
        assert store.events(None) == before


def read_model_columns(url: str) -> dict[str, dict[str, tuple[str, bool]]]:
    """Each read-model table's columns as the migrated store has them: (type, not null)."""
    found: dict[str, dict[str, tuple[str, bool]]] = {}
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
            for table in TABLES:
                rows = db.execute(f"PRAGMA table_info({table.name})").fetchall()
                found[table.name] = {r[1]: (r[2], bool(r[3])) for r in rows}
        return found
    dsn, schema = url.rsplit("?schema=", 1)
    with psycopg.connect(dsn) as conn:
        for table in TABLES:
            rows = conn.execute(
                "SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull"
                " FROM pg_attribute a WHERE a.attrelid = %s::regclass AND a.attnum > 0"
                " AND NOT a.attisdropped",
                (f'"{schema}".{table.name}',),
            ).fetchall()
            found[table.name] = {name: (kind, not_null) for name, kind, not_null in rows}
    return found


def defined_columns(types: dict[str, str]) -> dict[str, dict[str, tuple[str, bool]]]:
    """What projections/tables.py defines, in a backend's types (keys are NOT NULL)."""
    spelt = {"timestamptz": "timestamp with time zone"}
    return {
        table.name: {
            column.name: (
                spelt.get(types[column.type], types[column.type]),
                column.name in table.keys,
            )
            for column in table.columns
        }
        for table in TABLES
    }


def test_the_migrated_read_models_are_what_the_code_defines(durable_url: str) -> None:
    """The baseline spells the read models out: it must agree with projections/tables.py,
    whose definitions a rebuild's fresh tables are made from."""
    actae.open(durable_url).close()
    types: Any = (
        SqliteReadModels if durable_url.startswith("sqlite") else PostgresReadModels
    ).types

    assert read_model_columns(durable_url) == defined_columns(types)


RELEASED = {
    "postgres": ["d390735da6efcd86"],
    "sqlite": ["7fff1dabcc67d86d"],
}
"""The digest of each released migration's statements, in order, per backend: a store that
applied one never applies it again, so a migration once released is never edited (a later
change is appended). Appending a migration appends its digest here."""


@pytest.mark.parametrize(
    ("backend", "migrations"), [("postgres", POSTGRES_MIGRATIONS), ("sqlite", SQLITE_MIGRATIONS)]
)
def test_a_released_migration_is_never_edited(
    backend: str, migrations: tuple[Migration, ...]
) -> None:
    digests = [sha256("\n".join(m.statements).encode()).hexdigest()[:16] for m in migrations]
    assert digests[: len(RELEASED[backend])] == RELEASED[backend]
    assert len(digests) == len(RELEASED[backend]), "append the new migration's digest"
