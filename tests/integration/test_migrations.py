"""The store schema is versioned, created once under a lock, and never misread."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

import actae
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
