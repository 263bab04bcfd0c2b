"""The README's analyst queries, run as an analyst would: plain SQL against PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

import actae
from actae.projections.queries import (
    ANALYST_QUERIES,
    ANCESTRY,
    BLOCKED_RUNS_PER_WORKFLOW,
    DESCENDANTS,
    EFFECTS_RETRIED_MORE_THAN_TWICE,
    IN_DOUBT_OLDER_THAN_5_MINUTES,
    RUNS_WAITING_ON_APPROVAL,
)

pytestmark = pytest.mark.postgres


def block(store: actae.Store, workflow: str, key: str) -> None:
    run = store.start_run(workflow, agent_id="a", state={})
    claim = store.claim(key, run_id=run.run_id, worker="w", lease=30)
    store.fail_effect(key, token=claim.token, worker="w", error="declined", final=True)


def test_analyst_queries(pg_url: str, pg_dsn: str) -> None:
    clock = actae.ManualClock(datetime.now(UTC) - timedelta(hours=1))
    with actae.open(pg_url, clock=clock) as store:
        root = store.start_run("billing", agent_id="a", state={})
        store.claim("stale-charge", run_id=root.run_id, worker="dead", lease=30)
        store.claim("fresh-charge", run_id=root.run_id, worker="alive", lease=7200)
        first = store.fork(root.channel_id, at=1, reason="a")
        second = store.fork(first.child_channel_id, at=1, reason="b")
        child = store.start_run("billing", agent_id="sub", state={}, parent_run_id=root.run_id)
        for workflow, key in [("refunds", "r1"), ("refunds", "r2"), ("billing", "b1")]:
            block(store, workflow, key)
        for _ in range(3):
            claim = store.claim(
                "flaky",
                run_id=root.run_id,
                worker="w",
                lease=30,
                retry={"initial_delay": 1.0, "max_delay": 1.0, "max_total": 10_000},
            )
            store.fail_effect(
                "flaky", token=claim.token, worker="w", error="HTTP 503", retry_after=1
            )
            clock.advance(2)
        store.claim("flaky", run_id=root.run_id, worker="w", lease=3 * 3600)
        approver = store.start_run("purchases", agent_id="a", state={})
        store.suspend(approver.run_id, reason="approval", name="cfo", seconds=86400)
        store.projector().catch_up()

    schema = pg_url.rsplit("schema=", 1)[1]
    with psycopg.connect(pg_dsn, row_factory=dict_row) as analyst:
        analyst.execute(f'SET search_path TO "{schema}"')

        def rows(query: str, **params: Any) -> list[dict[str, Any]]:
            return analyst.execute(query, params).fetchall()

        assert [r["effect_key"] for r in rows(IN_DOUBT_OLDER_THAN_5_MINUTES)] == ["stale-charge"]
        assert [
            (r["ancestor"], r["depth"]) for r in rows(ANCESTRY, run_id=second.child_run_id)
        ] == [(first.child_run_id, 1), (root.run_id, 2)]
        assert {
            (r["descendant"], r["relation"], r["depth"])
            for r in rows(DESCENDANTS, run_id=root.run_id)
        } == {
            (first.child_run_id, "fork", 1),
            (child.run_id, "child", 1),
            (second.child_run_id, "fork", 2),
        }
        assert [(r["workflow_id"], r["blocked_runs"]) for r in rows(BLOCKED_RUNS_PER_WORKFLOW)] == [
            ("refunds", 2),
            ("billing", 1),
        ]
        assert [(r["run_id"], r["next_action"]) for r in rows(RUNS_WAITING_ON_APPROVAL)] == [
            (approver.run_id, "wait for approval cfo")
        ]
        assert [(r["effect_key"], r["retries"]) for r in rows(EFFECTS_RETRIED_MORE_THAN_TWICE)] == [
            ("flaky", 3)
        ]
        for query in ANALYST_QUERIES.values():
            rows(query, run_id=root.run_id)
