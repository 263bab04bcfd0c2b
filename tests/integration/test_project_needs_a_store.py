"""``actae project`` follows an existing store; pointed at none, it fails at once.

It used to treat every library error as transient: on a schema without Actae tables it
retried forever (or created an empty store to follow). A projector that follows nothing is
a mistyped URL, and the user should hear so in one line.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

import actae
from tests.integration.lines import Lines

ACTAE = [sys.executable, "-m", "actae.adapters.cli"]


def project(url: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run(
        [*ACTAE, "project", "--db", url], capture_output=True, text=True, timeout=60, check=False
    )
    return done, time.monotonic() - started


@pytest.mark.postgres
def test_project_on_a_schema_without_actae_tables_fails_at_once(pg_url: str, pg_dsn: str) -> None:
    schema = pg_url.rsplit("schema=", 1)[1]
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))

    done, took = project(pg_url)

    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1
    assert "no Actae store" in done.stderr
    assert took < 15
    with psycopg.connect(pg_dsn) as conn:
        tables = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = %s", (schema,)
        ).fetchone()
    assert tables == (0,), "following a store must never create one"


def test_project_on_a_missing_sqlite_file_fails_at_once(tmp_path: Path) -> None:
    done, _ = project(f"sqlite:///{tmp_path / 'nothing-here.db'}")

    assert done.returncode == 2, done.stderr
    assert "no Actae store" in done.stderr
    assert not (tmp_path / "nothing-here.db").exists()


@pytest.mark.postgres
def test_project_whose_store_is_dropped_under_it_stops_with_one_line(
    pg_url: str, pg_dsn: str
) -> None:
    """A missing table is no outage: the projector reports it instead of retrying forever."""
    actae.open(pg_url).close()
    schema = pg_url.rsplit("schema=", 1)[1]
    process = subprocess.Popen(
        [*ACTAE, "project", "--db", pg_url], stderr=subprocess.PIPE, text=True
    )
    try:
        assert process.stderr is not None
        lines = Lines(process.stderr)
        assert lines.next(30).startswith("caught up")
        drop_under(pg_dsn, schema)
        status = process.wait(timeout=30)
        rest = lines.rest(30)
    finally:
        process.kill()
        process.wait()
    assert status == 2, rest
    assert rest.count("\n") == 1
    assert rest.startswith("actae: error: no Actae store here any more")


def drop_under(dsn: str, schema: str) -> None:
    """Drop the schema under a running projector, never waiting on it for good.

    A DROP that queues behind the projector's batch (its tracking row is locked while it
    reads events on a second connection) would make the batch's read wait for the DROP: a
    cycle through the client that PostgreSQL cannot see. A short lock timeout breaks it;
    the DROP is tried again until it gets in between two batches.
    """
    deadline = time.monotonic() + 30
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET lock_timeout = '500ms'")
        while True:
            try:
                conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
                return
            except psycopg.errors.LockNotAvailable:
                if time.monotonic() > deadline:
                    raise
