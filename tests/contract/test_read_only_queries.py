"""``projector.query`` is the analyst's door: it reads, and whatever would write is refused."""

from __future__ import annotations

from pathlib import Path

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


# -- issue 28, item 7: one statement per call, nothing kept ----------------------------------


def _store_with_audit(store: actae.Store) -> actae.Projector:
    """A store with a run and two audit rows, projected."""
    run = store.start_run("q", agent_id="a", state={})
    store.pause(run.run_id, actor="ops", reason="look")
    store.hold(run.run_id, actor="ops", reason="keep")
    projector = store.projector()
    projector.catch_up()
    return projector


def _tables_named(store: actae.Store, name: str) -> int:
    """How many tables the store's database has by this name (asked beside projector.query)."""
    db = store.projector().db
    catalog = (
        "SELECT count(*) AS n FROM information_schema.tables WHERE table_name = %s"
        if db.name == "postgresql"
        else "SELECT count(*) AS n FROM sqlite_master WHERE name = ?"
    )
    return int(db.query(catalog, (name,))[0]["n"])


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT 1; COMMIT; DELETE FROM audit",
        "SELECT 1; COMMIT; UPDATE run_status SET status = 'completed'",
        "SELECT 1; COMMIT; CREATE TABLE mine (x int)",
        "SELECT 1; DELETE FROM audit",
        "DELETE FROM audit; SELECT 1",
    ],
)
def test_more_than_one_statement_is_refused_and_runs_nothing(
    store: actae.Store, statement: str
) -> None:
    projector = _store_with_audit(store)
    audit = projector.query("SELECT * FROM audit ORDER BY at")
    runs = projector.query("SELECT run_id, status FROM run_status")
    assert len(audit) == 2

    with pytest.raises(actae.ValidationError) as refused:
        projector.query(statement)

    assert refused.value.field == "statement"
    assert "exactly one" in str(refused.value)
    assert projector.query("SELECT * FROM audit ORDER BY at") == audit
    assert projector.query("SELECT run_id, status FROM run_status") == runs
    assert _tables_named(store, "mine") == 0


def test_one_statement_with_a_trailing_semicolon_or_comment_is_one(store: actae.Store) -> None:
    projector = _store_with_audit(store)

    assert projector.query("SELECT count(*) AS n FROM audit;") == [{"n": 2}]
    assert projector.query("SELECT count(*) AS n FROM audit; -- two") == [{"n": 2}]


def _session_tricks(store: actae.Store) -> list[str]:
    """Single statements that would leave something on a connection the projector shares."""
    if store.projector().db.name == "postgresql":
        return [
            "SELECT set_config('search_path', 'public', false)",
            "SET search_path TO public",
            "CREATE TEMP TABLE mine (x int)",
            "PREPARE mine AS SELECT 1",
            "SELECT pg_advisory_lock(28)",
            "COMMIT",
        ]
    return [
        "PRAGMA query_only = OFF",
        "ATTACH DATABASE ':memory:' AS mine",
        "CREATE TEMP TABLE mine (x int)",
        "BEGIN",
    ]


def test_nothing_a_statement_does_to_the_session_outlives_the_call(store: actae.Store) -> None:
    projector = _store_with_audit(store)

    refusals = []
    for statement in _session_tricks(store):
        try:
            projector.query(statement)
        except actae.ValidationError as refused:  # SQLite's authorizer refuses them outright
            refusals.append(refused.field)
    assert set(refusals) <= {"statement"}

    # the next catch-up and the next query see the store's tables, and nothing else
    store.start_run("q2", agent_id="a", state={})
    assert projector.catch_up() >= 1
    assert len(projector.query("SELECT run_id FROM run_status")) == 2
    with pytest.raises(actae.ValidationError):
        projector.query("DELETE FROM audit")
    assert len(projector.query("SELECT * FROM audit")) == 2
    with pytest.raises(Exception, match="mine"):
        projector.query("SELECT * FROM mine")


@pytest.mark.postgres
def test_a_statement_keeps_no_lock_or_prepared_statement_on_postgres(
    pg_url: str, pg_dsn: str
) -> None:
    with actae.open(pg_url) as store:
        projector = store.projector()
        projector.query("SELECT pg_advisory_lock(2828)")
        projector.query("PREPARE kept AS SELECT 1")

        with psycopg.connect(pg_dsn, autocommit=True) as other:
            (free,) = other.execute("SELECT pg_try_advisory_lock(2828)").fetchone() or (None,)
            other.execute("SELECT pg_advisory_unlock_all()")
        assert free is True
        with pytest.raises(psycopg.errors.InvalidSqlStatementName):
            projector.query("EXECUTE kept")
        assert projector.query("SELECT count(*) AS n FROM pg_prepared_statements") == [{"n": 0}]
        (path,) = projector.query("SELECT current_schemas(false) AS s")
        assert path["s"] == [store.projector().db.query("SELECT current_schema() AS c")[0]["c"]]


def test_an_attach_on_sqlite_is_refused_before_it_creates_a_file(tmp_path: Path) -> None:
    """The connection is read-only, but SQLite creates the file an ATTACH names before it
    refuses a write: only the authorizer keeps a statement from touching the disk."""
    elsewhere = tmp_path / "elsewhere.db"
    with actae.open(f"sqlite:///{tmp_path / 'runs.db'}") as store:
        projector = _store_with_audit(store)
        with pytest.raises(actae.ValidationError):
            projector.query(f"ATTACH DATABASE '{elsewhere}' AS mine")
    assert not elsewhere.exists()
