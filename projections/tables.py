"""The read-model tables: names, columns, types and what every column means.

This module is data, not SQL: adapters turn it into PostgreSQL or SQLite DDL, and the
README's table reference is generated from the same descriptions, so docs and schema cannot
drift apart. Types are abstract: ``uuid``, ``text``, ``int``, ``bool``, ``timestamp``,
``json``.
"""

from __future__ import annotations

from dataclasses import dataclass

from actae.domain.effects import OUTSTANDING, EffectStatus


@dataclass(frozen=True)
class Column:
    """A column, its abstract type and its meaning."""

    name: str
    type: str
    doc: str


@dataclass(frozen=True)
class Table:
    """A read-model table keyed by ``key``."""

    name: str
    key: str
    doc: str
    columns: tuple[Column, ...]
    indexes: tuple[str, ...] = ()
    """Columns rows are looked up by besides the key (one index each)."""

    def column(self, name: str) -> Column:
        """The column called ``name``."""
        return next(c for c in self.columns if c.name == name)


RUN_STATUS = Table(
    "run_status",
    "run_id",
    "One row per run: what it is doing now and what should happen next.",
    (
        Column("run_id", "uuid", "the run"),
        Column("workflow_id", "text", "the caller's business key of the workflow"),
        Column("agent_id", "text", "the agent that runs it"),
        Column("channel_id", "uuid", "the run's main channel"),
        Column(
            "status",
            "text",
            "running | retrying | blocked | waiting | paused | "
            "completed | failed | cancelled (retrying and blocked derive from effects)",
        ),
        Column("lifecycle", "text", "the run's own status, before effects are considered"),
        Column("waiting_reason", "text", "approval | timer | child | signal while waiting"),
        Column(
            "waiting_name",
            "text",
            "what it waits for: approval or signal name, timer, child:<run_id>",
        ),
        Column("wake_at", "timestamp", "when its timer fires or its wait expires"),
        Column("escalated", "bool", "an approval expired and was escalated to a person"),
        Column(
            "next_action",
            "text",
            "what should happen next, e.g. 'continue', 'retry effect <key>', 'review effect "
            "<key>', 'reconcile effect <key>', 'register workflow '<agent_id>'', 'fix and "
            "retry: <error>', 'wait for approval <name>', 'unpause', 'none'",
        ),
        Column("error", "text", "why the run failed (its Run.Failed event), until it is retried"),
        Column(
            "unserved",
            "bool",
            "running, and no live worker has a workflow registered for agent_id (workers "
            "advertise theirs in actae_worker_agents; set by every worker pass)",
        ),
        Column("next_retry_at", "timestamp", "earliest scheduled retry of its effects"),
        Column("attempts", "int", "effect attempts (claims) made by the run so far"),
        Column("open_effects", "int", "effects not settled yet"),
        Column("head_cursor", "int", "cursor of the last event on the main channel"),
        Column("state_version", "int", "state version in force at the head"),
        Column("model", "text", "pinned model"),
        Column("prompt", "text", "pinned prompt template version"),
        Column("tools", "text", "pinned tool-contract version"),
        Column("schema_version", "int", "pinned state-schema version"),
        Column("parent_run_id", "uuid", "delegating parent run, if a child run"),
        Column("forked_from_run_id", "uuid", "run this one was forked from, if a fork"),
        Column("deadline", "timestamp", "deadline of the run, if any"),
        Column("created_at", "timestamp", "when the run started"),
        Column("updated_at", "timestamp", "time of the last event applied to this row"),
    ),
)

LINEAGE = Table(
    "lineage",
    "child_run_id",
    "One row per edge: a fork (with its receipt) or a delegated child run.",
    (
        Column("child_run_id", "uuid", "the forked or delegated run"),
        Column("parent_run_id", "uuid", "the run it came from"),
        Column("relation", "text", "fork | child"),
        Column("workflow_id", "text", "workflow of the child"),
        Column("parent_channel_id", "uuid", "fork: the channel forked from"),
        Column("child_channel_id", "uuid", "the child's main channel"),
        Column("requested_boundary", "int", "fork: cursor asked for"),
        Column("resolved_boundary", "int", "fork: cursor where the copied state was made"),
        Column("state_version", "int", "fork: parent state version copied"),
        Column("state_checksum", "text", "fork: checksum of the copied state"),
        Column("reason", "text", "fork: why"),
        Column("model", "text", "pinned model of the child"),
        Column("operation_id", "text", "operation id of the fork or start"),
        Column("created_at", "timestamp", "when the edge was made"),
    ),
)

EFFECTS = Table(
    "effects",
    "effect_id",
    "One row per ledger effect, settled or not; the view outstanding_effects shows the "
    "unsettled ones. An effect is in doubt when in_doubt is true: its claim was granted over "
    "an unanswered one, or its lease ran out (expires_at <= now on the store's clock; the "
    "projector and every worker pass mark that as soon as it happens).",
    (
        Column("effect_id", "uuid", "ledger id of the effect"),
        Column("effect_key", "text", "the caller's idempotency key of the effect"),
        Column("run_id", "uuid", "the run it belongs to"),
        Column(
            "status",
            "text",
            "pending | claimed | retry_scheduled | needs_review | completed | abandoned",
        ),
        Column("holder", "text", "worker holding the claim"),
        Column("token", "int", "current fencing token"),
        Column("attempts", "int", "claims made so far (retries = attempts - 1)"),
        Column(
            "in_doubt",
            "bool",
            "status = 'claimed' and it may have happened: claimed_in_doubt, or the lease ran out",
        ),
        Column("claimed_in_doubt", "bool", "the current claim was granted over an unanswered one"),
        Column("first_claimed_at", "timestamp", "first claim"),
        Column("claimed_at", "timestamp", "current claim"),
        Column("expires_at", "timestamp", "lease expiry of the current claim"),
        Column("retry_at", "timestamp", "when the next attempt may start"),
        Column("last_error", "text", "error of the last failed attempt"),
        Column("settled_by", "text", "completed, reconciled by <actor>, or abandoned by <actor>"),
        Column("updated_at", "timestamp", "time of the last ledger event"),
    ),
    # run_id: a run's derived columns are recomputed from its effects; status: the leases
    # that run out are looked for among the claimed effects on every projector pass.
    indexes=("run_id", "status"),
)

TABLES = (RUN_STATUS, LINEAGE, EFFECTS)
SETTLED = tuple(status for status in EffectStatus if status not in OUTSTANDING)
"""Effect statuses that are final: the view outstanding_effects leaves them out."""
OUTSTANDING_VIEW = "outstanding_effects"
