"""What is going on in a store, for someone on call: lists, totals and one run in full.

Lists come from the read models, every row typed so the CLI and the console print the same
values on every backend. A run's own view adds the store's word on it (``store.run``).
"""

# ruff: noqa: S608 - SQL assembled from our own constant table and column names; values are bound

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any
from uuid import UUID

import orjson

from actae.adapters.runtime.store import Store
from actae.domain.effects import EffectStatus
from actae.domain.errors import ValidationError
from actae.domain.status import RUNNING_STATUSES, RunFacts, next_action
from actae.domain.validation import require_int, require_text
from actae.domain.values import RunInfo, RunStatus
from actae.projections.tables import TABLES

PAGE = 50
"""Rows a list returns when not told how many."""
MOST = 1000
"""The most rows one list returns (page with ``after``)."""
DEEPEST = 1000
"""Lineage levels followed up or down from a run (a guard; real trees are shallow)."""
SUMMED = ("steps_done", "input_tokens", "output_tokens", "cost")
"""run_status columns whose totals a dashboard shows."""
CONVERT: dict[str, Callable[[Any], Any]] = {
    "uuid": lambda value: value if isinstance(value, UUID) else UUID(str(value)),
    "text": str,
    "int": int,
    "float": float,
    "bool": bool,
    "timestamp": lambda v: v if isinstance(v, datetime) else datetime.fromisoformat(str(v)),
    "json": lambda value: orjson.loads(value) if isinstance(value, str | bytes) else value,
}
"""How a stored value of each abstract column type becomes a Python value."""
TYPES = {table.name: {column.name: column.type for column in table.columns} for table in TABLES}


FIRST_LOOK, LOOK_AT_MOST_EVERY = 0.002, 0.05
"""Seconds ``caught_up`` waits before its first look again, doubling up to the second."""


def caught_up(store: Store, within: float) -> bool:
    """Whether the read models reflect every event stored now, waiting up to ``within`` s."""
    target, projector = store.position(), store.projector()
    ends, pause = time.monotonic() + within, FIRST_LOOK
    while projector.position() < target:
        left = ends - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(pause, left))
        pause = min(pause * 2, LOOK_AT_MOST_EVERY)
    return True


Statement = Callable[[str], str]
"""A statement, given the backend's parameter mark (``%s`` or ``?``)."""


def select(
    store: Store, of: str, statement: Statement, params: Sequence[Any] = ()
) -> list[dict[str, Any]]:
    """Typed rows of a read-only ``statement`` over the table ``of``."""
    db, types = store.projector().db, TYPES[of]
    rows = db.query(statement(db.mark), [db.adapt(value) for value in params])
    return [
        {k: v if v is None or k not in types else CONVERT[types[k]](v) for k, v in row.items()}
        for row in rows
    ]


def rows_of(
    store: Store, of: str, conditions: dict[str, Any], order: str, limit: int | None = None
) -> list[dict[str, Any]]:
    """Typed rows of ``of`` meeting ``conditions`` (each with its ``{p}`` mark), in ``order``."""
    bounds = [*conditions.values(), *([] if limit is None else [limit])]

    def statement(p: str) -> str:
        where = " AND ".join(c.format(p=p) for c in conditions)
        most = "" if limit is None else f" LIMIT {p}"
        return f"SELECT * FROM {of} {'WHERE ' + where if where else ''} ORDER BY {order}{most}"

    return select(store, of, statement, bounds)


def limit_of(limit: int | None) -> int:
    """``limit`` checked (1 to :data:`MOST`), or :data:`PAGE` when not given."""
    return PAGE if limit is None else require_int("limit", limit, minimum=1, maximum=MOST)


def _status_in(kind: type[StrEnum], status: str) -> str:
    try:
        return kind(status).value
    except ValueError:
        names = ", ".join(s.value for s in kind)
        raise ValidationError("status", f"expected one of {names}, got {status!r}") from None


def runs(
    store: Store,
    *,
    status: str | None = None,
    workflow: str | None = None,
    agent: str | None = None,
    limit: int | None = None,
    after: UUID | None = None,
) -> list[dict[str, Any]]:
    """Runs newest first, filtered; ``after`` is the last run of the previous page."""
    conditions: dict[str, Any] = {}
    if status is not None:
        conditions["status = {p}"] = _status_in(RunStatus, status)
    for column, value in (("workflow_id", workflow), ("agent_id", agent)):
        if value is not None:
            conditions[f"{column} = {{p}}"] = require_text(column, value)
    if after is not None:
        conditions[
            "(created_at, run_id) < (SELECT created_at, run_id FROM run_status WHERE run_id = {p})"
        ] = after
    return rows_of(store, "run_status", conditions, "created_at DESC, run_id DESC", limit_of(limit))


def approvals(store: Store, *, limit: int | None = None) -> list[dict[str, Any]]:
    """Runs waiting for an approval, the longest-waiting first."""
    waiting = {"status = {p}": "waiting", "waiting_reason = {p}": "approval"}
    return rows_of(store, "run_status", waiting, "updated_at, run_id", limit_of(limit))


def status_counts(
    store: Store, of: str = "run_status", kind: type[StrEnum] = RunStatus
) -> dict[str, int]:
    """How many rows of ``of`` have each status of ``kind`` (every one listed, zeros included)."""
    rows = store.projector().db.query(f"SELECT status, count(*) AS n FROM {of} GROUP BY status")
    return {s.value: 0 for s in kind} | {str(row["status"]): int(row["n"]) for row in rows}


def effects(
    store: Store,
    *,
    in_doubt: bool = False,
    run_id: UUID | None = None,
    status: str | None = None,
    limit: int | None = None,
) -> list[dict[str, Any]]:
    """Ledger effects, most recently changed first: all, a run's, in doubt or by status."""
    conditions: dict[str, Any] = {}
    if in_doubt:
        conditions["in_doubt = {p}"] = True
    if run_id is not None:
        conditions["run_id = {p}"] = run_id
    if status is not None:
        conditions["status = {p}"] = _status_in(EffectStatus, status)
    return rows_of(store, "effects", conditions, "updated_at DESC, effect_key", limit_of(limit))


def audit(store: Store, run_id: UUID) -> list[dict[str, Any]]:
    """Every operator action on the run and its effects, oldest first."""
    return rows_of(store, "audit", {"run_id = {p}": run_id}, "at, aggregate_id, version")


def recent_audit(store: Store, *, limit: int | None = None) -> list[dict[str, Any]]:
    """The latest operator actions on any run, newest first."""
    return rows_of(store, "audit", {}, "at DESC, aggregate_id, version", limit_of(limit))


def _walk(store: Store, run_id: UUID, start: str, step: str, order: str) -> list[dict[str, Any]]:
    """Lineage rows from the edges whose ``start`` is ``run_id``, each with its ``depth``."""
    return select(
        store,
        "lineage",
        lambda p: (
            "WITH RECURSIVE walk AS ("
            f"SELECT lineage.*, 1 AS depth FROM lineage WHERE {start} = {p} "
            "UNION ALL SELECT l.*, walk.depth + 1 FROM lineage l "
            f"JOIN walk ON {step} WHERE walk.depth < {p}"
            f") SELECT * FROM walk ORDER BY {order} LIMIT {p}"
        ),
        [run_id, DEEPEST, MOST],
    )


def ancestry(store: Store, run_id: UUID) -> list[dict[str, Any]]:
    """The lineage edges from ``run_id`` up to its root (forks and delegations), nearest first."""
    return _walk(store, run_id, "child_run_id", "l.child_run_id = walk.parent_run_id", "depth")


def descendants(store: Store, run_id: UUID) -> list[dict[str, Any]]:
    """The lineage edges below ``run_id`` (its forks and children, theirs, ...), level by level."""
    order = "depth, created_at, child_run_id"
    return _walk(store, run_id, "parent_run_id", "l.parent_run_id = walk.child_run_id", order)


def _runs_among(count: int) -> Statement:
    return lambda p: f"SELECT * FROM run_status WHERE run_id IN ({', '.join([p] * count)})"


def run_rows(store: Store, run_ids: list[UUID]) -> dict[UUID, dict[str, Any]]:
    """The run_status rows of ``run_ids`` by run id (runs the projector has not seen are absent)."""
    found: dict[UUID, dict[str, Any]] = {}
    unique = list(dict.fromkeys(run_ids))
    for start in range(0, len(unique), PAGE):
        chunk = unique[start : start + PAGE]
        rows = select(store, "run_status", _runs_among(len(chunk)), chunk)
        found.update({row["run_id"]: row for row in rows})
    return found


@dataclass(frozen=True)
class Totals:
    """What the read models add up to (every status counted, zeros included), for a scrape."""

    runs: dict[str, int]
    effects: dict[str, int]
    in_doubt: int
    attempts: int
    retries: int  # attempts beyond each effect's first
    sums: dict[str, float] = field(default_factory=dict)


def totals(store: Store) -> Totals:
    """The store's totals as the read models have them now (no catching up: a scrape is cheap)."""
    (ledger,) = select(
        store,
        "effects",
        lambda p: (
            "SELECT coalesce(sum(attempts), 0) AS attempts_made, "
            "coalesce(sum(CASE WHEN attempts > 1 THEN attempts - 1 ELSE 0 END), 0) AS retried, "
            "coalesce(sum(CASE WHEN in_doubt THEN 1 ELSE 0 END), 0) AS doubtful FROM effects"
        ),
    )
    summed = ", ".join(f"coalesce(sum({name}), 0) AS total_{name}" for name in SUMMED)
    (row,) = select(store, "run_status", lambda p: f"SELECT {summed} FROM run_status")
    return Totals(
        runs=status_counts(store),
        effects=status_counts(store, "effects", EffectStatus),
        in_doubt=int(ledger["doubtful"]),
        attempts=int(ledger["attempts_made"]),
        retries=int(ledger["retried"]),
        sums={name: float(row[f"total_{name}"]) for name in SUMMED},
    )


@dataclass(frozen=True)
class RunView:
    """One run in full: the store's word on it, and its read-model ``row`` once projected.

    Without a row, ``status`` (its effects counted) and ``lifecycle`` (its own) come from the
    domain's rule applied to the store's word, so both say the same.
    """

    info: RunInfo
    row: dict[str, Any] | None
    status: str
    lifecycle: str
    next_action: str
    effects: list[dict[str, Any]] = field(default_factory=list)
    parents: list[dict[str, Any]] = field(default_factory=list)
    children: list[dict[str, Any]] = field(default_factory=list)


def run_view(store: Store, run_id: UUID) -> RunView:
    """The run ``run_id`` in full (``NotFoundError`` for a run the store never saw)."""
    info = store.run(run_id)
    rows = rows_of(store, "run_status", {"run_id = {p}": run_id}, "run_id")
    row, waiting = rows[0] if rows else None, info.waiting
    facts = RunFacts(
        lifecycle=info.status if info.status not in RUNNING_STATUSES else RunStatus.RUNNING,
        forgotten=info.forgotten_at is not None,
        waiting_reason=None if waiting is None else waiting.reason,
        waiting_name=None if waiting is None else waiting.name,
        escalated=waiting is not None and waiting.escalated,
        error=info.error,
        agent_id=info.agent_id,
    )
    return RunView(
        info=info,
        row=row,
        status=str(row["status"]) if row else info.status.value,
        lifecycle=str(row["lifecycle"]) if row and row.get("lifecycle") else facts.lifecycle.value,
        next_action=str(row["next_action"]) if row else next_action(facts),
        effects=effects(store, run_id=run_id, limit=MOST),
        parents=rows_of(store, "lineage", {"child_run_id = {p}": run_id}, "created_at"),
        children=rows_of(store, "lineage", {"parent_run_id = {p}": run_id}, "created_at"),
    )
