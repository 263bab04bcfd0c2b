"""Version 1 of each backend's schema: every table Actae owns, as one release made it.

Frozen: a change to any table is a new migration appended (``migrations.py``), never an
edit here; ``tests/integration/test_migrations.py`` holds the migrated read models equal to
:mod:`actae.projections.tables`. PostgreSQL's statements name the store's schema as
``{schema}``; SQLite's are the same ones in its words (:func:`in_sqlite`), so the backends
cannot disagree on a column.
"""

import re

POSTGRES_EVENTS = (
    # The event store. Positions (notification_id) are drawn in blocks by Actae's writers
    # (adapters/persistence/positions.py): the column has no default, so a writer that
    # does not (eventsourcing's own recorder) fails on its first insert instead of writing
    # positions that readers would not wait for. The sequence must not cache values. A row
    # that records an operation carries its id, unique (adapters/persistence/operation_ids.py).
    "CREATE TABLE {schema}.actae_events (originator_id uuid NOT NULL, originator_version "
    "bigint NOT NULL, topic text, state bytea, notification_id bigint NOT NULL, "
    "operation_id text, PRIMARY KEY (originator_id, originator_version)) WITH "
    "(autovacuum_enabled = true, autovacuum_vacuum_threshold = 100000000, "
    "autovacuum_vacuum_scale_factor = 0.5, autovacuum_analyze_threshold = 1000, "
    "autovacuum_analyze_scale_factor = 0.01)",
    "CREATE SEQUENCE {schema}.actae_events_notification_id_seq CACHE 1 OWNED BY "
    "{schema}.actae_events.notification_id",
    "CREATE UNIQUE INDEX actae_events_notification_id_idx ON {schema}.actae_events "
    "(notification_id)",
    "CREATE UNIQUE INDEX actae_events_operation_id ON {schema}.actae_events "
    "(operation_id) WHERE operation_id IS NOT NULL",
)
CUSTODY = (
    # One data key per run, wrapped by a master key of the keyring; NULL once forgotten.
    # Artifacts by name (a digest, or a keyed digest when encrypted), their bytes in chunks
    # of a blob, and which runs reference them; secrets the store keeps for itself (the
    # artifact references' key without a keyring, the forget token: forgets.py).
    "CREATE TABLE {schema}.actae_data_keys (run_id uuid PRIMARY KEY, master_key text NOT "
    "NULL, wrapped bytea, created_at timestamptz NOT NULL DEFAULT now(), forgotten_at "
    "timestamptz)",
    "CREATE TABLE {schema}.actae_artifacts (name text PRIMARY KEY, blob uuid NOT NULL, "
    "size bigint NOT NULL, created_at timestamptz NOT NULL DEFAULT now())",
    "CREATE TABLE {schema}.actae_artifact_chunks (blob uuid NOT NULL, seq integer NOT "
    "NULL, data bytea NOT NULL, PRIMARY KEY (blob, seq))",
    "CREATE TABLE {schema}.actae_artifact_refs (name text NOT NULL, run_id uuid NOT NULL,"
    " PRIMARY KEY (name, run_id))",
    "CREATE INDEX actae_artifact_refs_by_run ON {schema}.actae_artifact_refs (run_id)",
    "CREATE TABLE {schema}.actae_secrets (name text PRIMARY KEY, value bytea NOT NULL)",
)
READ_SIDE = (
    # The read models (projections/tables.py), the projector's tracking and poison events,
    # run leases, live workers' agents and regressed channels (adapters/readside/).
    "CREATE TABLE {schema}.run_status (run_id uuid NOT NULL, workflow_id text, agent_id "
    "text, channel_id uuid, status text, lifecycle text, waiting_reason text, "
    "waiting_name text, wake_at timestamptz, escalated boolean, next_action text, error "
    "text, forgotten_at timestamptz, ended_at timestamptz, held boolean, purged_at "
    "timestamptz, unserved boolean, next_retry_at timestamptz, attempts bigint, "
    "open_effects bigint, in_doubt_effects bigint, steps_done bigint, input_tokens double"
    " precision, output_tokens double precision, cost double precision, head_cursor "
    "bigint, state_version bigint, model text, prompt text, tools text, schema_version "
    "bigint, parent_run_id uuid, forked_from_run_id uuid, deadline timestamptz, "
    "created_at timestamptz, updated_at timestamptz, PRIMARY KEY (run_id))",
    "CREATE TABLE {schema}.lineage (child_run_id uuid NOT NULL, parent_run_id uuid, "
    "relation text, workflow_id text, parent_channel_id uuid, child_channel_id uuid, "
    "requested_boundary bigint, resolved_boundary bigint, state_version bigint, "
    "state_checksum text, reason text, model text, operation_id text, created_at "
    "timestamptz, PRIMARY KEY (child_run_id))",
    "CREATE TABLE {schema}.effects (effect_id uuid NOT NULL, effect_key text, run_id "
    "uuid, status text, holder text, token bigint, attempts bigint, in_doubt boolean, "
    "claimed_in_doubt boolean, first_claimed_at timestamptz, claimed_at timestamptz, "
    "expires_at timestamptz, deadline timestamptz, retry_at timestamptz, last_error text,"
    " settled_by text, result_summary text, updated_at timestamptz, PRIMARY KEY "
    "(effect_id))",
    "CREATE TABLE {schema}.audit (aggregate_id uuid NOT NULL, version bigint NOT NULL, "
    "run_id uuid, effect_key text, action text, actor text, reason text, detail jsonb, at"
    " timestamptz, PRIMARY KEY (aggregate_id, version))",
    "CREATE TABLE {schema}.usage (channel_id uuid NOT NULL, cursor bigint NOT NULL, "
    "run_id uuid, at timestamptz, input_tokens double precision, output_tokens double "
    "precision, cost double precision, PRIMARY KEY (channel_id, cursor))",
    "CREATE TABLE {schema}.actae_projection_tracking (name TEXT PRIMARY KEY, position "
    "bigint NOT NULL)",
    "CREATE TABLE {schema}.actae_projection_errors (name TEXT NOT NULL, position bigint "
    "NOT NULL, topic TEXT, originator_id uuid, error TEXT NOT NULL, recorded_at "
    "timestamptz NOT NULL, PRIMARY KEY (name, position))",
    "CREATE TABLE {schema}.actae_run_leases (run_id uuid PRIMARY KEY, worker TEXT NOT "
    "NULL, token bigint NOT NULL, expires_at timestamptz NOT NULL)",
    "CREATE TABLE {schema}.actae_regressions (channel_id uuid PRIMARY KEY, detail TEXT "
    "NOT NULL, found_at timestamptz NOT NULL)",
    "CREATE TABLE {schema}.actae_worker_agents (worker TEXT NOT NULL, agent_id TEXT NOT "
    "NULL, seen_until timestamptz NOT NULL, PRIMARY KEY (worker, agent_id))",
    "CREATE INDEX run_status_status_waiting_reason ON {schema}.run_status (status, waiting_reason)",
    "CREATE INDEX run_status_workflow_id_created_at ON {schema}.run_status (workflow_id, "
    "created_at)",
    "CREATE INDEX run_status_agent_id_created_at ON {schema}.run_status (agent_id, created_at)",
    "CREATE INDEX run_status_created_at_run_id ON {schema}.run_status (created_at, run_id)",
    "CREATE INDEX run_status_lifecycle ON {schema}.run_status (lifecycle)",
    "CREATE INDEX run_status_ended_at ON {schema}.run_status (ended_at)",
    "CREATE INDEX lineage_parent_run_id ON {schema}.lineage (parent_run_id)",
    "CREATE INDEX effects_run_id ON {schema}.effects (run_id)",
    "CREATE INDEX effects_status_expires_at ON {schema}.effects (status, expires_at)",
    "CREATE INDEX effects_in_doubt_updated_at ON {schema}.effects (in_doubt, updated_at)",
    "CREATE INDEX effects_attempts ON {schema}.effects (attempts)",
    "CREATE INDEX effects_effect_key ON {schema}.effects (effect_key)",
    "CREATE INDEX audit_run_id_at ON {schema}.audit (run_id, at)",
    "CREATE VIEW {schema}.outstanding_effects AS SELECT * FROM {schema}.effects WHERE "
    "status NOT IN ('completed', 'abandoned')",
    "CREATE VIEW {schema}.cost_per_day AS SELECT day, workflow_id, agent_id, model, "
    "count(DISTINCT run_id) AS runs, sum(input_tokens) AS input_tokens, "
    "sum(output_tokens) AS output_tokens, sum(cost) AS cost FROM (SELECT (u.at AT TIME "
    "ZONE 'UTC')::date AS day, r.workflow_id, r.agent_id, r.model, u.run_id, "
    "u.input_tokens - coalesce(lag(u.input_tokens) OVER w, 0) AS input_tokens, "
    "u.output_tokens - coalesce(lag(u.output_tokens) OVER w, 0) AS output_tokens, u.cost "
    "- coalesce(lag(u.cost) OVER w, 0) AS cost FROM {schema}.usage u LEFT JOIN "
    "{schema}.run_status r ON r.run_id = u.run_id WINDOW w AS (PARTITION BY "
    "r.workflow_id, r.agent_id, r.model, u.channel_id ORDER BY u.cursor)) AS added GROUP "
    "BY day, workflow_id, agent_id, model",
)
POSTGRES_BASELINE = (
    *POSTGRES_EVENTS,
    *CUSTODY,
    # Not compressed: pglz tries and fails on sealed chunks, 6x slower (docs/performance.md).
    "ALTER TABLE {schema}.actae_artifact_chunks ALTER COLUMN data SET STORAGE EXTERNAL",
    *READ_SIDE,
)

SQLITE_SPELLING = {
    **dict.fromkeys(("uuid", "text", "jsonb", "timestamptz"), "TEXT"),
    **dict.fromkeys(("bigint", "integer", "boolean"), "INTEGER"),
    "double precision": "REAL",
    "bytea": "BLOB",
    "now()": "CURRENT_TIMESTAMP",
    "(u.at AT TIME ZONE 'UTC')::date": "date(u.at)",
    "{schema}.": "",
}
"""PostgreSQL's words in the custody and read-side statements, and SQLite's for them."""
_SPELT = re.compile(
    "|".join(rf"\b{w}\b" if w.replace(" ", "").isalpha() else re.escape(w) for w in SQLITE_SPELLING)
)


def in_sqlite(statement: str) -> str:
    """A custody or read-side statement in SQLite's types, unqualified by a schema."""
    return _SPELT.sub(lambda word: SQLITE_SPELLING[word.group()], statement)


SQLITE_EVENTS = (
    # eventsourcing's table (the rowid is the position: one writer at a time keeps it in
    # order), with the operation ids a row records, unique.
    "CREATE TABLE stored_events (originator_id TEXT, originator_version INTEGER, topic "
    "TEXT, state BLOB, operation_id TEXT, PRIMARY KEY (originator_id, "
    "originator_version))",
    "CREATE UNIQUE INDEX stored_events_operation_id ON stored_events (operation_id) WHERE"
    " operation_id IS NOT NULL",
)
SQLITE_BASELINE = SQLITE_EVENTS + tuple(map(in_sqlite, CUSTODY + READ_SIDE))
