"""What an analyst sees in psql: described tables, uuid ids, and documented queries that paste.

Every read-model table, view and column carries its description from
``projections/tables.py`` as a PostgreSQL comment, on a new schema, after an upgrade and
after a rebuild swapped fresh tables in. Every id column is ``uuid``, so any two join. The
analyst queries of docs/read-models.md are ``projections/queries.py`` rendered for psql
(:func:`actae.projections.queries.psql`); each is run here through the real ``psql`` binary,
as pasted, on a store with data, and returns the rows it should.
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

import actae
from actae.adapters.readside.schema import ERRORS, LEASES, descriptions
from actae.projections.queries import ANALYST_QUERIES, AUDIT_LOG, psql
from actae.projections.reference import analyst_queries, table_reference
from actae.projections.tables import TABLES, VIEWS
from tests.generated_docs import COMMAND

pytestmark = pytest.mark.postgres

READ_MODELS = Path(__file__).resolve().parents[2] / "docs" / "read-models.md"
OPERATIONS = READ_MODELS.parent / "operations.md"
QUERIES_HEADING = "## Example analyst queries (PostgreSQL)"
BUSINESS_KEYS = {"workflow_id", "agent_id", "operation_id"}
"""Columns named ``*_id`` that hold the caller's text keys, not Actae's ids."""


def documented_queries() -> list[tuple[str, str]]:
    """(title, SQL) of each query in docs/read-models.md's analyst section, as printed."""
    text = READ_MODELS.read_text()
    section = text[text.index(QUERIES_HEADING) :]
    section = section[: section.index("\n## ", 1)]
    pairs = re.findall(r"\n([^\n`]+):\n\n```sql\n(.*?)\n```", section, flags=re.DOTALL)
    return [(title, sql) for title, sql in pairs]


def test_the_docs_show_every_query_as_it_pastes_into_psql() -> None:
    assert analyst_queries() in READ_MODELS.read_text(), f"regenerate with {COMMAND}"
    printed = [sql for _, sql in documented_queries()]
    assert printed == [psql(q) for q in ANALYST_QUERIES.values()]
    assert not any("%(" in sql for sql in printed)


def test_the_operations_guide_shows_the_audit_query_as_it_pastes() -> None:
    assert psql(AUDIT_LOG) in OPERATIONS.read_text()


def test_the_docs_describe_every_table_and_view_with_its_keys_and_indexes() -> None:
    assert table_reference() in READ_MODELS.read_text(), f"regenerate with {COMMAND}"


# -- psql --------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def psql_binary() -> str:
    """The psql client; skip (locally) or fail (CI) without it, as for the server."""
    found = shutil.which("psql")
    if found is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("psql is required when CI=true (the PostgreSQL client package)")
        pytest.skip("psql not installed")
    return found


Psql = Callable[..., str]


@pytest.fixture
def in_psql(psql_binary: str, pg_url: str, pg_dsn: str) -> Psql:
    """Run psql commands on the test's schema, as an analyst would; returns what it prints."""
    schema = pg_url.rsplit("schema=", 1)[1]

    def run(*commands: str, stdin: str | None = None, **variables: str) -> str:
        args = [psql_binary, "-X", "-q", "-v", "ON_ERROR_STOP=1", "--csv"]
        for name, value in variables.items():
            args += ["-v", f"{name}={value}"]
        for command in commands:
            args += ["-c", command]
        if stdin is not None:
            args += ["-f", "-"]
        environment = {**os.environ, "PGOPTIONS": f"-c search_path={schema}"}
        done = subprocess.run(
            [*args, pg_dsn],
            input=stdin,
            capture_output=True,
            text=True,
            env=environment,
            check=False,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    return run


def table_of(output: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(output)))


# -- descriptions and id types ---------------------------------------------------------------


def comments(pg_url: str, pg_dsn: str) -> dict[tuple[str, str | None], str | None]:
    """The comment of every described table, view and column, as PostgreSQL has it."""
    schema = pg_url.rsplit("schema=", 1)[1]
    with psycopg.connect(pg_dsn) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        found = {}
        for _, relation, column, _ in descriptions():
            if column is None:
                statement = "SELECT obj_description(%s::regclass, 'pg_class')"
                row = conn.execute(statement, (relation,)).fetchone()
            else:
                statement = (
                    "SELECT col_description(%s::regclass, attnum) FROM pg_attribute "
                    "WHERE attrelid = %s::regclass AND attname = %s"
                )
                row = conn.execute(statement, (relation, relation, column)).fetchone()
            assert row is not None, f"{relation}.{column} does not exist"
            found[(relation, column)] = row[0]
        return found


def described() -> dict[tuple[str, str | None], str | None]:
    return {(relation, column): text for _, relation, column, text in descriptions()}


def test_psql_shows_the_description_of_every_table_view_and_column(
    pg_url: str, pg_dsn: str, in_psql: Psql
) -> None:
    with actae.open(pg_url) as store:
        store.projector()

    assert comments(pg_url, pg_dsn) == described()
    listed = in_psql(r"\dt+", r"\dv+")
    for relation in (*TABLES, *VIEWS):
        assert relation.doc in listed
    columns = in_psql(r"\d+ run_status")
    assert all(column.doc in columns for column in TABLES[0].columns)


def test_descriptions_come_back_after_they_changed_and_after_a_rebuild(
    pg_url: str, pg_dsn: str
) -> None:
    with actae.open(pg_url) as store:
        store.start_run("described", agent_id="a", state={})
        projector = store.projector()
        projector.catch_up()
        with projector.db.transaction():  # descriptions from another release
            for kind, relation, column, _ in descriptions():
                target = f"{kind} {relation}" if column is None else f"COLUMN {relation}.{column}"
                projector.db.execute(f"COMMENT ON {target} IS NULL")
        assert set(comments(pg_url, pg_dsn).values()) == {None}

        projector.db.ensure_schema()
        assert comments(pg_url, pg_dsn) == described()

        projector.rebuild()
        assert comments(pg_url, pg_dsn) == described()


def id_columns(pg_url: str, pg_dsn: str) -> dict[tuple[str, str], str]:
    """Every column named like an id in the read models and their bookkeeping, by type."""
    schema = pg_url.rsplit("schema=", 1)[1]
    names = [t.name for t in TABLES] + [ERRORS, LEASES]
    with psycopg.connect(pg_dsn) as conn:
        rows = conn.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = %s AND table_name = ANY(%s) AND column_name LIKE %s",
            (schema, names, "%id"),
        ).fetchall()
    return {(t, c): kind for t, c, kind in rows if c not in BUSINESS_KEYS}


def test_every_id_is_a_uuid(pg_url: str, pg_dsn: str) -> None:
    actae.open(pg_url).close()

    ids = id_columns(pg_url, pg_dsn)
    assert set(ids.values()) == {"uuid"}
    assert {("actae_projection_errors", "originator_id"), ("audit", "aggregate_id")} <= set(ids)


# -- the documented queries, pasted into psql ------------------------------------------------


def block(store: actae.Store, workflow: str, key: str) -> None:
    run = store.start_run(workflow, agent_id="a", state={})
    claim = store.claim(key, run_id=run.run_id, worker="w", lease=30)
    store.fail_effect(key, token=claim.token, worker="w", error="declined", final=True)


def analysts_store(store: actae.Store, clock: actae.ManualClock) -> dict[str, Any]:
    """A store with a row for every query: forks, a child, doubts, retries, waits, actions."""
    root = store.start_run("billing", agent_id="a", state={}, pins={"model": "m-1"})
    usage = {"input_tokens": 1000.0, "output_tokens": 100.0, "cost": 0.5}
    store.record(root.channel_id, kind="step.result", payload={}, expected_cursor=1, usage=usage)
    day = clock().astimezone(UTC).date().isoformat()
    store.claim("stale-charge", run_id=root.run_id, worker="dead", lease=30)
    store.claim("fresh-charge", run_id=root.run_id, worker="alive", lease=7200)
    first = store.fork(root.channel_id, at=2, reason="a")
    store.record(
        first.child_channel_id, kind="step.result", payload={}, expected_cursor=1, usage=usage
    )
    second = store.fork(first.child_channel_id, at=1, reason="b")
    child = store.start_run("billing", agent_id="sub", state={}, parent_run_id=root.run_id)
    for workflow, key in [("refunds", "r1"), ("refunds", "r2"), ("billing", "b1")]:
        block(store, workflow, key)
    retrying = store.start_run("refunds", agent_id="a", state={})
    claim = store.claim("later", run_id=retrying.run_id, worker="w", lease=30)
    store.fail_effect("later", token=claim.token, worker="w", error="429", retry_after=30)
    for _ in range(3):
        claim = store.claim(
            "flaky",
            run_id=root.run_id,
            worker="w",
            lease=30,
            retry={"initial_delay": 1.0, "max_delay": 1.0, "max_total": 10_000},
        )
        store.fail_effect("flaky", token=claim.token, worker="w", error="HTTP 503", retry_after=1)
        clock.advance(2)
    store.claim("flaky", run_id=root.run_id, worker="w", lease=3 * 3600)
    approver = store.start_run("purchases", agent_id="a", state={})
    store.suspend(approver.run_id, reason="approval", name="cfo", seconds=86400)
    store.pause(root.run_id, actor="ops", reason="look")
    clock.advance(1)
    store.unpause(root.run_id, actor="ops", reason="ok")
    clock.advance(60)  # the stale charge's lease is over: in doubt
    store.projector().catch_up()
    return {
        "root": root,
        "first": first,
        "second": second,
        "child": child,
        "approver": approver,
        "day": day,
    }


@pytest.fixture
def analysts(pg_url: str) -> dict[str, Any]:
    clock = actae.ManualClock(datetime.now(UTC) - timedelta(hours=1))
    with actae.open(pg_url, clock=clock) as store:
        return analysts_store(store, clock)


Expected = dict[str, tuple[str, list[tuple[str, ...]]]]


def expected_rows(made: dict[str, Any]) -> Expected:
    """Per query: the run it asks about (if any), and its rows' first columns, in order."""
    root = str(made["root"].run_id)
    first = str(made["first"].child_run_id)
    second = str(made["second"].child_run_id)
    child = str(made["child"].run_id)
    expected: Expected = {
        "in doubt for more than 5 minutes": ("", [("stale-charge",)]),
        "effects in doubt now": ("", [("stale-charge",)]),
        "ancestry of a run": (second, [(first, "fork", "1"), (root, "fork", "2")]),
        "descendants of a run": (
            root,
            [*sorted([(first, "fork", "1"), (child, "child", "1")]), (second, "fork", "2")],
        ),
        "runs waiting, retrying or blocked": (
            "",
            [("blocked",), ("blocked",), ("blocked",), ("retrying",), ("waiting",)],
        ),
        "blocked runs per workflow": ("", [("refunds", "2"), ("billing", "1")]),
        "runs waiting on approval": ("", [(str(made["approver"].run_id), "wait for approval cfo")]),
        "effects retried more than twice": ("", [("flaky", "3")]),
        "a run's audit log": (root, [("pause", "ops", "", "look"), ("unpause", "ops", "", "ok")]),
        "tokens and cost per day": ("", [(made["day"], "billing", "2", "2000", "1")]),
    }
    return expected


COMPARED = {
    "in doubt for more than 5 minutes": ("effect_key",),
    "effects in doubt now": ("effect_key",),
    "ancestry of a run": ("ancestor", "relation", "depth"),
    "descendants of a run": ("descendant", "relation", "depth"),
    "runs waiting, retrying or blocked": ("status",),
    "blocked runs per workflow": ("workflow_id", "blocked_runs"),
    "runs waiting on approval": ("run_id", "next_action"),
    "effects retried more than twice": ("effect_key", "retries"),
    "a run's audit log": ("action", "actor", "effect_key", "reason"),
    "tokens and cost per day": ("day", "workflow_id", "runs", "input_tokens", "cost"),
}
"""The columns each query's expected rows name."""


def test_every_documented_query_pastes_into_psql_and_returns_its_rows(
    analysts: dict[str, Any], in_psql: Psql
) -> None:
    expected = expected_rows(analysts)
    printed = dict((title.lower(), sql) for title, sql in documented_queries())
    assert set(printed) == set(expected) == set(COMPARED)

    for title, sql in printed.items():
        run_id, want = expected[title]
        found = table_of(in_psql(stdin=sql + "\n", run_id=run_id or "none"))
        got = [tuple(row[column] for column in COMPARED[title]) for row in found]
        assert got == want, title
