"""Every documented query reads through an index: EXPLAIN on 100,000 rows per table.

The read-model tables of a fresh schema are filled with ``INSERT ... SELECT ...
generate_series`` (a realistic spread: most runs completed, few waiting, retrying or
blocked; most effects completed at the first attempt, a few in doubt or retried; lineage a
binary tree; usage ten rows per channel), analysed, and each query of
``projections/queries.py`` (and those Actae runs itself on every pass) is explained with a
realistic parameter. A ``Seq Scan`` of a read-model table fails the test, except where a
query reads a whole table by design (``READS_EVERY_ROW``: totals over all history).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

import actae
from actae.adapters.readside.standings import expire_sql, facts_sql
from actae.adapters.runtime.worker import CANDIDATES
from actae.projections.queries import ANALYST_QUERIES, READS_EVERY_ROW
from actae.projections.tables import TABLES
from tests.conftest import with_schema

pytestmark = pytest.mark.postgres

ROWS = 100_000
RUN = "md5('run' || {})::uuid"
"""The id of run number ``{}`` (1 to ROWS): the fill and the parameters agree on it."""

FILL = {
    "run_status": f"""
INSERT INTO run_status (run_id, workflow_id, agent_id, channel_id, status, lifecycle,
    waiting_reason, waiting_name, escalated, next_action, unserved, attempts, open_effects,
    in_doubt_effects, steps_done, input_tokens, output_tokens, cost, head_cursor,
    state_version, model, created_at, updated_at)
SELECT {RUN.format("i")}, 'wf-' || i % 500, 'agent-' || i % 50, md5('channel' || i)::uuid,
    s.status, CASE WHEN s.status IN ('retrying', 'blocked') THEN 'running' ELSE s.status END,
    CASE WHEN s.status = 'waiting' THEN (ARRAY['approval', 'timer', 'signal'])[i % 3 + 1] END,
    CASE WHEN s.status = 'waiting' THEN 'manager' END,
    false, 'none', false, 1, 0, 0, 3, 100, 10, 0.01, 12, 2, 'm-' || i % 5,
    now() - i * interval '1 minute', now() - i * interval '30 seconds'
FROM generate_series(1, {ROWS}) AS i,
LATERAL (SELECT CASE
    WHEN i % 100 = 0 THEN 'running' WHEN i % 100 = 1 THEN 'waiting'
    WHEN i % 100 = 2 THEN 'retrying' WHEN i % 200 = 3 THEN 'blocked'
    WHEN i % 200 = 103 THEN 'failed' ELSE 'completed' END AS status) AS s
""",
    "lineage": f"""
INSERT INTO lineage (child_run_id, parent_run_id, relation, workflow_id, child_channel_id,
    resolved_boundary, created_at)
SELECT {RUN.format("i")}, {RUN.format("i / 2")}, CASE WHEN i % 2 = 0 THEN 'fork' ELSE 'child' END,
    'wf-' || i % 500, md5('channel' || i)::uuid, 3, now() - i * interval '1 minute'
FROM generate_series(2, {ROWS}) AS i
""",
    "effects": f"""
INSERT INTO effects (effect_id, effect_key, run_id, status, token, attempts, in_doubt,
    claimed_in_doubt, claimed_at, expires_at, updated_at)
SELECT md5('effect' || i)::uuid, 'run-' || i || ':effect:pay:1', {RUN.format("i")},
    CASE WHEN i % 1000 = 0 THEN 'claimed' ELSE 'completed' END, 1,
    CASE WHEN i % 500 = 0 THEN 5 ELSE 1 END, i % 2000 = 0, false,
    now() - i * interval '1 minute', now() - i * interval '1 minute' + interval '30 seconds',
    now() - i * interval '1 minute'
FROM generate_series(1, {ROWS}) AS i
""",
    "audit": f"""
INSERT INTO audit (aggregate_id, version, run_id, action, actor, reason, detail, at)
SELECT {RUN.format("i % 50000 + 1")}, i / 50000 + 3, {RUN.format("i % 50000 + 1")},
    'pause', 'ops', 'look', '{{}}', now() - i * interval '1 minute'
FROM generate_series(1, {ROWS}) AS i
""",
    "usage": f"""
INSERT INTO usage (channel_id, cursor, run_id, at, input_tokens, output_tokens, cost)
SELECT md5('channel' || (i / 10 + 1))::uuid, i % 10 + 2, {RUN.format("i / 10 + 1")},
    now() - i * interval '1 minute', (i % 10 + 1) * 100, (i % 10 + 1) * 10, (i % 10 + 1) * 0.01
FROM generate_series(0, {ROWS - 1}) AS i
""",
}

OWN_STATEMENTS = {
    "the worker's live runs": CANDIDATES,
    "the projector's lease sweep": expire_sql("effects", "%(now)s"),
    "the projector's next expiry": (
        "SELECT min(expires_at) FROM effects WHERE status = 'claimed' AND NOT expires_at <= %(now)s"
    ),
    "a run's facts, for its derived columns": facts_sql("", 1, "%(run_id)s"),
    "newest runs (the operator's list)": (
        "SELECT * FROM run_status ORDER BY created_at DESC, run_id DESC LIMIT 50"
    ),
    "a workflow's newest runs": (
        "SELECT * FROM run_status WHERE workflow_id = 'wf-7' "
        "ORDER BY created_at DESC, run_id DESC LIMIT 50"
    ),
    "an effect by key": "SELECT * FROM effects WHERE effect_key = 'run-77:effect:pay:1'",
}
"""Statements Actae itself runs over the read models, on every pass or for every list."""


@pytest.fixture(scope="module")
def filled(pg_dsn: str) -> Iterator[psycopg.Connection[dict[str, Any]]]:
    """A connection to a schema whose read models hold ROWS rows each, analysed.

    The rows go into the tables as the store's migrations made them, indexes and all.
    """
    schema = f"plans_{uuid.uuid4().hex[:16]}"
    conn = psycopg.connect(pg_dsn, row_factory=dict_row, autocommit=True)
    try:
        with actae.open(with_schema(pg_dsn, schema)):
            conn.execute(f"SET search_path TO {schema}")
            for statement in FILL.values():
                conn.execute(statement)
        for table in TABLES:
            conn.execute(f"ANALYZE {table.name}")
        yield conn
    finally:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")
        conn.close()


def scans(plan: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    """Every (node type, relation, index) of a JSON plan, depth first."""
    yield plan["Node Type"], plan.get("Relation Name", ""), plan.get("Index Name", "")
    for child in plan.get("Plans", []):
        yield from scans(child)


def explained(conn: psycopg.Connection[dict[str, Any]], query: str) -> list[tuple[str, str, str]]:
    """The nodes of ``query``'s plan, with realistic parameters."""
    run = conn.execute(f"SELECT {RUN.format(12345)} AS id").fetchone()
    assert run is not None
    params = {"run_id": run["id"], "now": "2026-01-01T00:00:00+00:00"}
    with psycopg.ClientCursor(conn) as cursor:  # literal parameters, a custom plan for them
        (row,) = cursor.execute(f"EXPLAIN (FORMAT JSON) {query}", params).fetchall()
    (plan,) = row["QUERY PLAN"]
    return list(scans(plan["Plan"]))


def seq_scans(conn: psycopg.Connection[dict[str, Any]], query: str) -> set[str]:
    """The read-model tables ``query`` reads with a Seq Scan."""
    names = {table.name for table in TABLES}
    return {relation for node, relation, _ in explained(conn, query) if node == "Seq Scan"} & names


@pytest.mark.parametrize("title", list(ANALYST_QUERIES))
def test_a_documented_query_reads_through_indexes(
    filled: psycopg.Connection[dict[str, Any]], title: str
) -> None:
    query = ANALYST_QUERIES[title]

    scanned = seq_scans(filled, query)

    assert scanned <= set(READS_EVERY_ROW.get(query, ())), f"{title}: Seq Scan of {scanned}"


@pytest.mark.parametrize(
    ("condition", "index", "scanned"),
    [
        ("workflow_id = 'wf-7'", "run_status_workflow_id_created_at", {"usage"}),
        ("agent_id = 'agent-7'", "run_status_agent_id_created_at", {"usage"}),
    ],
    ids=["a workflow", "an agent"],
)
def test_cost_per_day_of_some_runs_finds_them_before_it_takes_differences(
    filled: psycopg.Connection[dict[str, Any]], condition: str, index: str, scanned: set[str]
) -> None:
    """The window partitions by the run's workflow, agent and model too, so a filter on them
    reaches run_status's indexes before any difference is taken, instead of filtering the
    differences of every run. The usage rows are read whole: summing is a scan anyway.
    """
    query = f"SELECT * FROM cost_per_day WHERE {condition}"

    assert index in {name for _, _, name in explained(filled, query)}
    assert seq_scans(filled, query) <= scanned


@pytest.mark.parametrize("title", list(OWN_STATEMENTS))
def test_what_actae_runs_on_every_pass_reads_through_indexes(
    filled: psycopg.Connection[dict[str, Any]], title: str
) -> None:
    assert seq_scans(filled, OWN_STATEMENTS[title]) == set(), title


def test_the_fill_is_what_the_plans_were_asked_about(
    filled: psycopg.Connection[dict[str, Any]],
) -> None:
    """The parameters name rows that exist: the plans answer a realistic question."""
    counts = {
        table.name: filled.execute(f"SELECT count(*) AS n FROM {table.name}").fetchone()
        for table in TABLES
    }
    assert {name: row["n"] for name, row in counts.items() if row} == {
        "run_status": ROWS,
        "lineage": ROWS - 1,
        "effects": ROWS,
        "audit": ROWS,
        "usage": ROWS,
    }
    run = RUN.format(12345)
    (children,) = filled.execute(
        f"SELECT count(*) AS n FROM lineage WHERE parent_run_id = {run}"
    ).fetchall()
    (actions,) = filled.execute(f"SELECT count(*) AS n FROM audit WHERE run_id = {run}").fetchall()
    assert (children["n"], actions["n"]) == (2, 2)
