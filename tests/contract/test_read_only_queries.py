"""``projector.query`` is the analyst's door: it reads, and whatever would write is refused."""

from __future__ import annotations

import psycopg
import pytest

import actae


@pytest.mark.parametrize(
    "statement",
    [
        "DELETE FROM run_status",
        "UPDATE run_status SET status = 'completed'",
        "DROP TABLE lineage",
        "CREATE TABLE mine (x int)",
    ],
)
def test_a_statement_that_would_write_is_refused_and_changes_nothing(
    store: actae.Store, statement: str
) -> None:
    store.start_run("q", agent_id="a", state={})
    projector = store.projector()
    projector.catch_up()
    before = projector.query("SELECT run_id, status FROM run_status")

    with pytest.raises(actae.ValidationError) as refused:
        projector.query(statement)

    assert refused.value.field == "statement"
    assert projector.query("SELECT run_id, status FROM run_status") == before
    assert projector.query("SELECT count(*) AS n FROM lineage") == [{"n": 0}]
    store.start_run("q2", agent_id="a", state={})  # the projector still writes its own rows
    projector.catch_up()
    assert len(projector.query("SELECT run_id FROM run_status")) == 2


@pytest.mark.parametrize(
    "schema",
    ["s" * 64, "information_schema", "pg_catalog", "pg_mine"],
    ids=["64 bytes", "information_schema", "pg_catalog", "pg_mine"],
)
def test_a_schema_postgres_would_cut_or_owns_is_refused(schema: str) -> None:
    with pytest.raises(actae.ValidationError) as refused:
        actae.open(f"postgresql://postgres@127.0.0.1:5432/test?schema={schema}")

    assert refused.value.field == "url.schema"


@pytest.mark.postgres
def test_a_schema_of_63_bytes_is_accepted(pg_dsn: str) -> None:
    schema = "s" * 63
    try:
        with actae.open(f"{pg_dsn}?schema={schema}") as store:
            assert store.start_run("long", agent_id="a", state={}).cursor == 1
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
