"""``actae.open(url, create=False)`` opens an existing store and never creates one.

Read-only tools (the inspection commands) use it, so a mistyped URL is reported instead of
leaving an empty store behind.
"""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

import actae
from actae.adapters.persistence.url import parse_store_url


def test_a_missing_sqlite_file_is_refused_and_not_created(tmp_path: Path) -> None:
    path = tmp_path / "absent.db"

    with pytest.raises(actae.StoreNotFoundError) as refused:
        actae.open(f"sqlite:///{path}", create=False)

    assert refused.value.url == f"sqlite:///{path}"
    assert not path.exists()


@pytest.mark.postgres
def test_a_missing_postgres_schema_is_refused_and_not_created(pg_url: str, pg_dsn: str) -> None:
    schema = parse_store_url(pg_url).postgres_schema

    with pytest.raises(actae.StoreNotFoundError):
        actae.open(pg_url, create=False)

    with psycopg.connect(pg_dsn) as conn:
        found = conn.execute(
            "SELECT count(*) FROM information_schema.schemata WHERE schema_name = %s", (schema,)
        ).fetchone()
    assert found == (0,)


def test_an_existing_store_opens_without_create(durable_url: str) -> None:
    with actae.open(durable_url) as store:
        run = store.start_run("wf", agent_id="a", state={"n": 1})

    with actae.open(durable_url, create=False) as store:
        assert store.run(run.run_id).workflow_id == "wf"


def test_the_refusal_is_a_not_found_error() -> None:
    # Callers that already handle NotFoundError (and LookupError) need no new branch.
    assert issubclass(actae.StoreNotFoundError, actae.NotFoundError)
