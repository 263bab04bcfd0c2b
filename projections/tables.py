r"""The read-model tables and views: names, columns, abstract types and each column's meaning.

Data, not SQL: adapters make DDL and PostgreSQL comments from it, and docs/read-models.md is
rendered from it. Types: ``uuid``, ``text``, ``int``, ``float``, ``bool``, ``timestamp``, ``date``,
``json``.
"""

from __future__ import annotations

import textwrap
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
    """A read-model table keyed by ``key``: one column, or a tuple of them (a composite key)."""

    name: str
    key: str | tuple[str, ...]
    doc: str
    columns: tuple[Column, ...]
    indexes: tuple[tuple[str, ...], ...] = ()
    """The columns of each index besides the key's, for the documented queries' lookups."""

    @property
    def keys(self) -> tuple[str, ...]:
        """The key's columns, in order (one for a simple key)."""
        return (self.key,) if isinstance(self.key, str) else self.key

    def column(self, name: str) -> Column:
        """The column called ``name``."""
        return next(c for c in self.columns if c.name == name)


@dataclass(frozen=True)
class View:
    """A read-model view: a query over the tables, described like one."""

    name: str
    doc: str
    columns: tuple[Column, ...]


TYPES = frozenset({"uuid", "text", "int", "float", "bool", "timestamp", "date", "json"})
"""The abstract column types the adapters know how to make."""


def columns(text: str) -> tuple[Column, ...]:
    """Columns one a line, ``name type: meaning`` (indented lines go on); else the import fails."""
    lines: list[str] = []
    for line in textwrap.dedent(text).strip("\n").splitlines():
        if line[:1].isspace() and lines:
            lines[-1] += " " + line.strip()
        else:
            lines.append(line.strip())
    found: dict[str, Column] = {}
    for line in lines:
        name, _, rest = line.partition(" ")
        type_, colon, doc = rest.partition(": ")
        if not (name.isidentifier() and type_ in TYPES and colon and doc) or name in found:
            msg = f"not a new column {line!r}: expected 'name type: meaning', type one of"
            raise ValueError(f"{msg} {sorted(TYPES)}")
        found[name] = Column(name, type_, doc)
    return tuple(found.values())


SUMMARY_LENGTH = 200
"""Characters of an effect's result kept in ``effects.result_summary``."""

USAGE_NAMES = ("input_tokens", "output_tokens", "cost")
"""The usage names the read models total (OpenTelemetry's ``gen_ai.usage.*``); others only count
towards a budget."""


RUN_STATUS = Table(
    "run_status",
    "run_id",
    "One row per run: what it is doing now and what should happen next.",
    columns("""
    run_id uuid: the run
    workflow_id text: the caller's business key of the workflow
    agent_id text: the agent that runs it
    channel_id uuid: the run's main channel
    status text: running | retrying | blocked | waiting | paused | completed | failed |
        cancelled | forgotten (retrying and blocked derive from effects; forgotten: its
        contents were destroyed, lifecycle keeps how it ended)
    lifecycle text: the run's own status, before effects are considered
    waiting_reason text: approval | timer | child | signal while waiting
    waiting_name text: what it waits for: approval or signal name, timer, child:<run_id>
    wake_at timestamp: when its timer fires or its wait expires
    escalated bool: an approval expired and was escalated to a person
    next_action text: what should happen next, e.g. 'continue', 'retry effect <key>', 'review
        effect <key>', 'reconcile effect <key>', 'register workflow '<agent_id>'', 'fix and
        retry: <error>', 'wait for approval <name>', 'unpause', 'none'
    error text: why the run failed (its Run.Failed event), until it is retried; empty when the
        store encrypts (read it with the keyring: actae show)
    forgotten_at timestamp: when its contents were destroyed (store.forget): its structure
        stays, its payloads, states and results can never be read again
    ended_at timestamp: when it completed, failed or was cancelled (retention counts from then)
    held bool: a legal hold is on it (store.hold): retention never purges it
    purged_at timestamp: when retention purged it: its events are deleted, this row and its
        lineage, usage and audit rows stay (audit without detail); its effects rows go
    unserved bool: running, and no live worker has a workflow registered for agent_id (workers
        advertise theirs in actae_worker_agents; set by every worker pass)
    next_retry_at timestamp: earliest scheduled retry of its effects
    attempts int: effect attempts (claims) made by the run so far
    open_effects int: effects not settled yet
    in_doubt_effects int: its effects in doubt now (effects.in_doubt), to be reconciled; a
        retried step's attempt counter (key with :attempts) is made again instead and not
        counted
    steps_done int: step results recorded on its main channel (kind step.result; replays add
        none)
    input_tokens float: input tokens its steps recorded (usage input_tokens)
    output_tokens float: output tokens its steps recorded (usage output_tokens)
    cost float: cost its steps recorded (usage cost)
    head_cursor int: cursor of the last event on the main channel
    state_version int: state version in force at the head
    model text: pinned model
    prompt text: pinned prompt template version
    tools text: pinned tool-contract version
    schema_version int: pinned state-schema version
    parent_run_id uuid: delegating parent run, if a child run
    forked_from_run_id uuid: run this one was forked from, if a fork
    deadline timestamp: deadline of the run, if any
    created_at timestamp: when the run started
    updated_at timestamp: time of the last event applied to this row
"""),
    # Runs by status (and what they wait for), a workflow's and an agent's runs newest first,
    # the newest runs, and the worker's pass over live runs. None of these columns changes on
    # a run's every event, so the frequent updates of the head columns stay cheap. Retention
    # looks for finished runs by when they ended.
    indexes=(
        ("status", "waiting_reason"),
        ("workflow_id", "created_at"),
        ("agent_id", "created_at"),
        ("created_at", "run_id"),
        ("lifecycle",),
        ("ended_at",),
    ),
)

LINEAGE = Table(
    "lineage",
    "child_run_id",
    "One row per edge: a fork (with its receipt) or a delegated child run.",
    columns("""
    child_run_id uuid: the forked or delegated run
    parent_run_id uuid: the run it came from
    relation text: fork | child
    workflow_id text: workflow of the child
    parent_channel_id uuid: fork: the channel forked from
    child_channel_id uuid: the child's main channel
    requested_boundary int: fork: cursor asked for
    resolved_boundary int: fork: cursor where the copied state was made
    state_version int: fork: parent state version copied
    state_checksum text: fork: checksum of the copied state
    reason text: fork: why
    model text: pinned model of the child
    operation_id text: operation id of the fork or start
    created_at timestamp: when the edge was made
"""),
    indexes=(("parent_run_id",),),  # a run's descendants walk down from the parent
)

EFFECTS = Table(
    "effects",
    "effect_id",
    "One row per ledger effect, settled or not; the view outstanding_effects shows the "
    "unsettled ones. An effect is in doubt when in_doubt is true: its claim was granted over "
    "an unanswered one, or its lease ran out (expires_at <= now on the store's clock; the "
    "projector and every worker pass mark that as soon as it happens).",
    columns(f"""
    effect_id uuid: ledger id of the effect
    effect_key text: the caller's idempotency key of the effect
    run_id uuid: the run it belongs to
    status text: pending | claimed | retry_scheduled | needs_review | completed | abandoned
    holder text: worker holding the claim
    token int: current fencing token
    attempts int: claims made so far (retries = attempts - 1)
    in_doubt bool: status = 'claimed' and it may have happened: claimed_in_doubt, or the lease
        ran out
    claimed_in_doubt bool: the current claim was granted over an unanswered one
    first_claimed_at timestamp: first claim
    claimed_at timestamp: current claim
    expires_at timestamp: lease expiry of the current claim
    deadline timestamp: when the current attempt must be over (claim time + timeout): no
        takeover before
    retry_at timestamp: when the next attempt may start
    last_error text: error of the last failed attempt
    settled_by text: completed, reconciled by <actor>, or abandoned by <actor>
    result_summary text: the start of its result as compact JSON (at most {SUMMARY_LENGTH}
        characters), once completed or reconciled as completed
    updated_at timestamp: time of the last ledger event
"""),
    # run_id: a run's derived columns are recomputed from its effects; (status, expires_at):
    # the claims whose lease ran out, looked for on every projector pass and by the in-doubt
    # query; the rest serve the effects in doubt, the retried ones and a lookup by key.
    indexes=(
        ("run_id",),
        ("status", "expires_at"),
        ("in_doubt", "updated_at"),
        ("attempts",),
        ("effect_key",),
    ),
)

AUDIT = Table(
    "audit",
    ("aggregate_id", "version"),
    "One row per operator action on a run or an effect: who did what, when and why, from "
    "the events that carry an actor (approvals, denials and signals; pause, unpause, cancel, "
    "retry and fail; an effect's reconciliation, override or abandonment; forgetting, legal "
    "holds, purges and retention policies).",
    columns("""
    aggregate_id uuid: the run or the effect acted on (the event's aggregate; the store's
        retention policies for a policy change)
    version int: the event's version in that aggregate
    run_id uuid: the run acted on, or the run of the effect acted on; null for a policy change
    effect_key text: the effect acted on; null for an action on the run
    action text: approve | deny | signal | pause | unpause | cancel | retry | fail | reconcile
        | override | abandon | forget | hold | release | purge | retention
    actor text: who acted, as they named themselves (a worker, or actae)
    reason text: why: the reason or note given (a failure's error, an override's reason); an
        approval's or denial's note only on a store in clear: on an encrypted store the note is
        sealed with the decision, this is null and detail.noted says one was given
    detail json: what else it said: approval or signal name, payload, whether it woke the run
        and whether a note was given (noted); the status an unpause returned to; a
        reconciliation's outcome, evidence and result; the events a purge deleted; a retention
        policy's agent and durations (emptied when the run is purged; contents stay out when
        the store encrypts)
    at timestamp: when, on the store's clock
"""),
    indexes=(("run_id", "at"),),  # a run's audit log, oldest first
)

USAGE = Table(
    "usage",
    ("channel_id", "cursor"),
    "One row per channel event that carries usage totals: the run's running totals after "
    "it, as every channel event carries them (cumulative, not what the event added; the view "
    "cost_per_day takes the differences). A fork's channel starts its totals at zero.",
    columns("""
    channel_id uuid: the run's main channel
    cursor int: the event's cursor on it
    run_id uuid: the run
    at timestamp: when the event was recorded
    input_tokens float: the run's input tokens so far
    output_tokens float: the run's output tokens so far
    cost float: the run's cost so far
"""),
)

TABLES = (RUN_STATUS, LINEAGE, EFFECTS, AUDIT, USAGE)
SETTLED = tuple(status for status in EffectStatus if status not in OUTSTANDING)
"""Effect statuses that are final: the view outstanding_effects leaves them out."""
OUTSTANDING_VIEW = "outstanding_effects"

OUTSTANDING_EFFECTS = View(
    OUTSTANDING_VIEW,
    "The rows of effects whose status is not completed or abandoned.",
    EFFECTS.columns,
)

COST_PER_DAY = View(
    "cost_per_day",
    "Tokens and cost per UTC day, workflow, agent and model: what each usage row added to "
    "its channel's totals (total minus the previous row's), summed.",
    columns("""
    day date: the UTC date of the usage
    workflow_id text: workflow of the runs
    agent_id text: agent of the runs
    model text: pinned model of the runs
    runs int: runs that recorded usage that day
    input_tokens float: input tokens recorded that day
    output_tokens float: output tokens recorded that day
    cost float: cost recorded that day
"""),
)

VIEWS = (OUTSTANDING_EFFECTS, COST_PER_DAY)
