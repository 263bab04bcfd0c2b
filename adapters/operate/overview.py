"""Lists and totals over the whole store, for the console's pages and its ``/metrics``.

:mod:`~actae.adapters.operate.views` answers "which runs, and this one in full"; this module
adds what a dashboard asks: the approvals inbox, effects by status, the lineage around a run
in both directions, several runs' rows at once, the recent audit log, and totals. Every row
is typed as views' rows are.
"""

# ruff: noqa: S608 - SQL assembled from our own constant table and column names; values are bound

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from actae.adapters.operate.views import (
    MOST,
    PAGE,
    Statement,
    limit_of,
    select,
    status_counts,
    status_in,
)
from actae.adapters.runtime.store import Store
from actae.domain.effects import EffectStatus
from actae.domain.validation import require_int

DEEPEST = 1000
"""Lineage levels followed up or down from a run (a guard; real trees are shallow)."""

SUMMED = ("steps_done", "input_tokens", "output_tokens", "cost")
"""run_status columns whose totals a dashboard shows."""


def approvals(store: Store, *, limit: int | None = None) -> list[dict[str, Any]]:
    """Runs waiting for an approval, the longest-waiting first."""
    return select(
        store,
        "run_status",
        lambda p: (
            "SELECT * FROM run_status "
            f"WHERE status = {p} AND waiting_reason = {p} ORDER BY updated_at, run_id LIMIT {p}"
        ),
        ["waiting", "approval", limit_of(limit)],
    )


def effects_with_status(
    store: Store, status: str, *, limit: int | None = None
) -> list[dict[str, Any]]:
    """Effects whose ledger status is ``status`` (say, ``needs_review``), most recent first."""
    return select(
        store,
        "effects",
        lambda p: (
            f"SELECT * FROM effects WHERE status = {p} "
            f"ORDER BY updated_at DESC, effect_key LIMIT {p}"
        ),
        [status_in(EffectStatus, status), limit_of(limit)],
    )


def _walk(
    store: Store, run_id: UUID, start: str, step: str, order: str, limit: int = DEEPEST
) -> list[dict[str, Any]]:
    """Lineage rows from ``run_id`` (the edges whose ``start`` it is), ``step`` by ``step``.

    Each row is a lineage row (a fork's carries its receipt) plus ``depth`` (1: an edge of
    the run itself), at most :data:`DEEPEST` levels and ``limit`` rows.
    """
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
        [run_id, DEEPEST, limit],
    )


def ancestry(store: Store, run_id: UUID) -> list[dict[str, Any]]:
    """The lineage edges from ``run_id`` up to its root (forks and delegations), nearest first."""
    return _walk(store, run_id, "child_run_id", "l.child_run_id = walk.parent_run_id", "depth")


def descendants(store: Store, run_id: UUID, *, limit: int = MOST) -> list[dict[str, Any]]:
    """The lineage edges below ``run_id`` (its forks and children, theirs, ...), level by level."""
    return _walk(
        store,
        run_id,
        "parent_run_id",
        "l.parent_run_id = walk.child_run_id",
        "depth, created_at, child_run_id",
        require_int("limit", limit, minimum=1, maximum=MOST),
    )


def _runs_among(count: int) -> Statement:
    """The run_status rows whose run id is one of ``count`` parameters."""
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


def recent_audit(store: Store, *, limit: int | None = None) -> list[dict[str, Any]]:
    """The latest operator actions on any run, newest first."""
    return select(
        store,
        "audit",
        lambda p: f"SELECT * FROM audit ORDER BY at DESC, aggregate_id, version LIMIT {p}",
        [limit_of(limit)],
    )


@dataclass(frozen=True)
class Totals:
    """What the read models add up to, for a dashboard or a metrics scrape."""

    runs: dict[str, int]
    """Runs by status (every status, zeros included)."""
    effects: dict[str, int]
    """Effects by ledger status (every status, zeros included)."""
    in_doubt: int
    """Effects in doubt now."""
    attempts: int
    """Effect attempts (claims) made, all effects together."""
    retries: int
    """Attempts beyond each effect's first."""
    sums: dict[str, float] = field(default_factory=dict)
    """Totals of the :data:`SUMMED` run_status columns."""


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
    (row,) = select(
        store,
        "run_status",
        lambda p: (
            "SELECT "
            + ", ".join(f"coalesce(sum({name}), 0) AS total_{name}" for name in SUMMED)
            + " FROM run_status"
        ),
    )
    sums = {name: float(row[f"total_{name}"]) for name in SUMMED}
    return Totals(
        runs=status_counts(store),
        effects=status_counts(store, "effects", EffectStatus),
        in_doubt=int(ledger["doubtful"]),
        attempts=int(ledger["attempts_made"]),
        retries=int(ledger["retried"]),
        sums=sums,
    )
