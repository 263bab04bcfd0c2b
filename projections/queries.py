r"""Example analyst queries over the read models (PostgreSQL; the tests run them).

Written with psycopg's ``%(name)s`` parameters; :func:`psql` gives docs/read-models.md's form. All
but :data:`COST_PER_DAY`'s totals read through an index (``tests/integration/test_query_plans.py``).
"""

from __future__ import annotations

import re

IN_DOUBT_OLDER_THAN_5_MINUTES = """
SELECT effect_key, run_id, holder, token, attempts, expires_at
FROM outstanding_effects
WHERE status = 'claimed' AND expires_at < now() - interval '5 minutes'
ORDER BY expires_at
"""

EFFECTS_IN_DOUBT = """
SELECT effect_key, run_id, holder, token, attempts, claimed_in_doubt, expires_at
FROM effects
WHERE in_doubt AND position(':attempts' in effect_key) = 0
ORDER BY updated_at
"""


def _lineage_walk(walk: str, start: str, step: str, answer: str) -> str:
    """A recursive walk over lineage from ``%(run_id)s``, up or down, and what it answers."""
    return f"""
WITH RECURSIVE {walk} AS (
    SELECT child_run_id, parent_run_id, relation, resolved_boundary, 1 AS depth
    FROM lineage WHERE {start} = %(run_id)s
    UNION ALL
    SELECT l.child_run_id, l.parent_run_id, l.relation, l.resolved_boundary, {walk}.depth + 1
    FROM lineage l JOIN {walk} ON {step}
)
{answer}
"""  # noqa: S608 - the walk's own constant names


ANCESTRY = _lineage_walk(
    "up",
    "child_run_id",
    "l.child_run_id = up.parent_run_id",
    "SELECT parent_run_id AS ancestor, relation, resolved_boundary, depth FROM up ORDER BY depth",
)

DESCENDANTS = _lineage_walk(
    "down",
    "parent_run_id",
    "l.parent_run_id = down.child_run_id",
    "SELECT child_run_id AS descendant, parent_run_id, relation, resolved_boundary, depth\n"
    "FROM down ORDER BY depth, child_run_id",
)

RUNS_HELD_UP = """
SELECT run_id, workflow_id, status, next_action, next_retry_at, wake_at, updated_at
FROM run_status WHERE status IN ('waiting', 'retrying', 'blocked')
ORDER BY status, updated_at, run_id
"""

BLOCKED_RUNS_PER_WORKFLOW = """
SELECT workflow_id, count(*) AS blocked_runs
FROM run_status WHERE status = 'blocked'
GROUP BY workflow_id ORDER BY blocked_runs DESC, workflow_id
"""

RUNS_WAITING_ON_APPROVAL = """
SELECT run_id, workflow_id, next_action, updated_at
FROM run_status WHERE status = 'waiting' AND waiting_reason = 'approval'
ORDER BY updated_at
"""

EFFECTS_RETRIED_MORE_THAN_TWICE = """
SELECT effect_key, run_id, status, attempts - 1 AS retries, last_error
FROM effects WHERE attempts > 3
ORDER BY attempts DESC, effect_key
"""

AUDIT_LOG = """
SELECT at, action, actor, effect_key, reason, detail
FROM audit WHERE run_id = %(run_id)s
ORDER BY at, aggregate_id, version
"""

COST_PER_DAY = """
SELECT day, workflow_id, agent_id, model, runs, input_tokens, output_tokens, cost
FROM cost_per_day
ORDER BY day DESC, cost DESC, workflow_id, agent_id, model
"""

ANALYST_QUERIES = {
    "in doubt for more than 5 minutes": IN_DOUBT_OLDER_THAN_5_MINUTES,
    "effects in doubt now": EFFECTS_IN_DOUBT,
    "ancestry of a run": ANCESTRY,
    "descendants of a run": DESCENDANTS,
    "runs waiting, retrying or blocked": RUNS_HELD_UP,
    "blocked runs per workflow": BLOCKED_RUNS_PER_WORKFLOW,
    "runs waiting on approval": RUNS_WAITING_ON_APPROVAL,
    "effects retried more than twice": EFFECTS_RETRIED_MORE_THAN_TWICE,
    "a run's audit log": AUDIT_LOG,
    "tokens and cost per day": COST_PER_DAY,
}
"""The queries by title, in the order docs/read-models.md shows them."""

READS_EVERY_ROW = {COST_PER_DAY: ("usage", "run_status")}
"""Queries that read whole tables by design: totals over all history."""


def psql(query: str) -> str:
    """``query`` as it pastes into psql: parameters as psql variables, ended by a semicolon."""
    text = re.sub(r"%\((\w+)\)s", r":'\1'", query.strip()).replace("%%", "%")
    return f"{text};"
