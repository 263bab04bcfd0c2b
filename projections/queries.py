"""Example analyst queries over the read models (PostgreSQL; the test suite runs them).

Parameters use psycopg's ``%(name)s`` style. On SQLite the same tables exist; replace
``now() - interval '5 minutes'`` with ``datetime('now', '-5 minutes')``.
"""

from __future__ import annotations

IN_DOUBT_OLDER_THAN_5_MINUTES = """
SELECT effect_key, run_id, holder, token, attempts, expires_at
FROM outstanding_effects
WHERE status = 'claimed' AND expires_at < now() - interval '5 minutes'
ORDER BY expires_at
"""

ANCESTRY = """
WITH RECURSIVE up AS (
    SELECT child_run_id, parent_run_id, relation, resolved_boundary, 1 AS depth
    FROM lineage WHERE child_run_id = %(run_id)s
    UNION ALL
    SELECT l.child_run_id, l.parent_run_id, l.relation, l.resolved_boundary, up.depth + 1
    FROM lineage l JOIN up ON l.child_run_id = up.parent_run_id
)
SELECT parent_run_id AS ancestor, relation, resolved_boundary, depth FROM up ORDER BY depth
"""

DESCENDANTS = """
WITH RECURSIVE down AS (
    SELECT child_run_id, parent_run_id, relation, resolved_boundary, 1 AS depth
    FROM lineage WHERE parent_run_id = %(run_id)s
    UNION ALL
    SELECT l.child_run_id, l.parent_run_id, l.relation, l.resolved_boundary, down.depth + 1
    FROM lineage l JOIN down ON l.parent_run_id = down.child_run_id
)
SELECT child_run_id AS descendant, parent_run_id, relation, resolved_boundary, depth
FROM down ORDER BY depth, child_run_id
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
FROM effects WHERE attempts - 1 > 2
ORDER BY attempts DESC, effect_key
"""

ANALYST_QUERIES = {
    "in doubt for more than 5 minutes": IN_DOUBT_OLDER_THAN_5_MINUTES,
    "ancestry of a run": ANCESTRY,
    "descendants of a run": DESCENDANTS,
    "blocked runs per workflow": BLOCKED_RUNS_PER_WORKFLOW,
    "runs waiting on approval": RUNS_WAITING_ON_APPROVAL,
    "effects retried more than twice": EFFECTS_RETRIED_MORE_THAN_TWICE,
}
