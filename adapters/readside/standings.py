"""run_status's derived columns: the domain's :func:`~actae.domain.status.standing` of runs' facts.

One statement reads the facts of many runs, the rule decides, and only the rows whose derived
columns change are written. Every caller holds the projector's tracking lock (or a new
table's creation lock), so no fact changes between the read and the write.
"""

# ruff: noqa: S608 - SQL assembled from our own constant table and column names, never input

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

from actae.adapters.readside.schema import REGRESSIONS, WORKERS
from actae.domain.effects import STEP_ATTEMPTS, EffectStatus
from actae.domain.status import RunFacts, Standing, standing
from actae.domain.values import RunStatus

CLAIMED = f"status = '{EffectStatus.CLAIMED}'"
CHUNK = 400
"""Runs whose facts one statement reads (each is two parameters, far below SQLite's limit)."""
DERIVED = ("attempts", "in_doubt_effects", "next_retry_at", "status", "next_action")
ASKING = (EffectStatus.NEEDS_REVIEW, EffectStatus.IN_DOUBT, EffectStatus.RETRY_SCHEDULED)
"""The effect statuses whose first key the facts carry (``RunFacts.effects``)."""


class Transactional(Protocol):
    """The read models' connection (``ReadModelDB``)."""

    @property
    def mark(self) -> str:
        """The driver's positional parameter."""

    def adapt(self, value: Any) -> Any:
        """A Python value in the form this backend's driver stores."""

    def execute(self, statement: str, params: Sequence[Any] = ()) -> Any:
        """Run one statement (written with the parameter ``mark``)."""

    def executemany(self, statement: str, rows: list[Sequence[Any]]) -> None:
        """Run one statement for many rows."""

    def query(self, statement: str, params: Any = None) -> list[dict[str, Any]]:
        """Rows of one statement, as dicts."""

    def transaction(self) -> AbstractContextManager[None]:
        """A transaction, or a savepoint inside one."""


def _effects_sql(effects: str, where: str) -> str:
    # Each run's effects summed up: the first key of each asking status, and the totals. In
    # doubt counts what next_action would reconcile: never a step's attempt counter.
    in_doubt = (
        f"e.{CLAIMED} AND e.in_doubt "
        f"AND replace(e.effect_key, '{STEP_ATTEMPTS}', '') = e.effect_key"
    )
    retry = f"e.status = '{EffectStatus.RETRY_SCHEDULED}'"
    return f"""SELECT e.run_id,
        min(CASE WHEN e.status = '{EffectStatus.NEEDS_REVIEW}' THEN e.effect_key END) AS review,
        min(CASE WHEN {in_doubt} THEN e.effect_key END) AS reconcile,
        min(CASE WHEN {retry} THEN e.effect_key END) AS retry,
        sum(e.attempts) AS attempts,
        sum(CASE WHEN {in_doubt} THEN 1 ELSE 0 END) AS in_doubt_effects,
        min(CASE WHEN {retry} THEN e.retry_at END) AS next_retry_at
    FROM {effects} e {where} GROUP BY e.run_id"""


def facts_sql(suffix: str, ids: int | None, mark: str) -> str:
    """The facts and current derived columns of ``ids`` runs (``None``: of every run)."""
    marks = ", ".join([mark] * (ids or 0))
    runs = "" if ids is None else f"WHERE r.run_id IN ({marks})"
    mine = "" if ids is None else f"WHERE e.run_id IN ({marks})"
    return f"""SELECT r.run_id, r.lifecycle, r.forgotten_at IS NOT NULL AS forgotten,
    r.waiting_reason, r.waiting_name, r.escalated, r.error, r.agent_id, r.unserved,
    (SELECT g.detail FROM {REGRESSIONS} g WHERE g.channel_id = r.channel_id) AS regressed,
    e.review, e.reconcile, e.retry,
    coalesce(e.attempts, 0) AS new_attempts,
    coalesce(e.in_doubt_effects, 0) AS new_in_doubt_effects,
    e.next_retry_at AS new_next_retry_at,
    r.attempts, r.in_doubt_effects, r.next_retry_at, r.status, r.next_action
FROM run_status{suffix} r LEFT JOIN ({_effects_sql(f"effects{suffix}", mine)}) e
    ON e.run_id = r.run_id {runs}"""


def derived(row: dict[str, Any]) -> tuple[Any, ...]:
    """The derived columns (``DERIVED``) of a run's row of :func:`facts_sql`."""
    keys = (row["review"], row["reconcile"], row["retry"])
    facts = RunFacts(
        lifecycle=RunStatus(row["lifecycle"] or RunStatus.RUNNING),
        forgotten=bool(row["forgotten"]),
        waiting_reason=row["waiting_reason"],
        waiting_name=row["waiting_name"],
        escalated=bool(row["escalated"]),
        error=row["error"],
        agent_id=row["agent_id"],
        unserved=bool(row["unserved"]),
        regressed=row["regressed"],
        effects={s: key for s, key in zip(ASKING, keys, strict=True) if key is not None},
    )
    stands: Standing = standing(facts)
    totals = (row["new_attempts"], row["new_in_doubt_effects"], row["new_next_retry_at"])
    return (*totals, stands.status.value, stands.next_action)


def refresh_runs(db: Transactional, run_ids: Iterable[Any] | None, suffix: str = "") -> None:
    """Recompute the derived columns of ``run_ids`` (``None``: of every run), where they change."""
    p = db.mark
    update = (
        f"UPDATE run_status{suffix} SET {', '.join(f'{c} = {p}' for c in DERIVED)} "
        f"WHERE run_id = {p}"
    )
    changed: list[Sequence[Any]] = []
    for rows in _facts(db, run_ids, suffix):
        for row in rows:
            columns = derived(row)
            if columns != tuple(row[c] for c in DERIVED):
                changed.append([*(db.adapt(v) for v in columns), row["run_id"]])
    if changed:
        db.executemany(update, changed)


def _facts(
    db: Transactional, run_ids: Iterable[Any] | None, suffix: str
) -> Iterator[list[dict[str, Any]]]:
    """The rows of :func:`facts_sql` for ``run_ids``, a chunk at a time (in run id order)."""
    if run_ids is None:
        yield db.query(facts_sql(suffix, None, db.mark))
        return
    ordered = sorted({UUID(str(run)) for run in run_ids}, key=str)
    for start in range(0, len(ordered), CHUNK):
        chunk = [db.adapt(run) for run in ordered[start : start + CHUNK]]
        yield db.query(facts_sql(suffix, len(chunk), db.mark), [*chunk, *chunk])


def runs_of_effects(db: Transactional, effect_ids: Iterable[Any], suffix: str = "") -> set[Any]:
    """The runs whose effects ``effect_ids`` are (to refresh after their effects changed)."""
    ids = [db.adapt(e) for e in effect_ids]
    runs: set[Any] = set()
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start : start + CHUNK]
        marks = ", ".join([db.mark] * len(chunk))
        statement = f"SELECT DISTINCT run_id FROM effects{suffix} WHERE effect_id IN ({marks})"
        runs.update(row[0] for row in db.execute(statement, chunk).fetchall())
    return runs


def lease_ran_out(mark: str) -> str:
    """The domain's ``lease_ran_out(expires_at, now)`` in SQL, on the store's clock (``mark``)."""
    return f"expires_at <= {mark}"


def expire_sql(effects: str, mark: str) -> str:
    """Set ``in_doubt`` of each claim where it changes (an unanswered claim, a lease run out)."""
    doubt = f"(claimed_in_doubt OR {lease_ran_out(mark)})"
    return (
        f"UPDATE {effects} SET in_doubt = {doubt} "
        f"WHERE {CLAIMED} AND in_doubt <> {doubt} RETURNING run_id"
    )


def mark_unserved(db: Transactional, now: datetime) -> list[Any]:
    """Flag running runs no live worker serves at ``now`` (unflag served ones); the changed."""
    p = db.mark
    served = (
        f"EXISTS (SELECT 1 FROM {WORKERS} w WHERE w.agent_id = r.agent_id AND w.seen_until > {p})"
    )
    rows = db.execute(
        f"SELECT r.run_id, r.unserved, {served} FROM run_status r WHERE r.lifecycle = 'running'",
        (db.adapt(now),),
    ).fetchall()
    changed = [(run, not serves) for run, flagged, serves in rows if bool(flagged) == bool(serves)]
    if changed:
        db.executemany(
            f"UPDATE run_status SET unserved = {p} WHERE run_id = {p}",
            [(db.adapt(unserved), run) for run, unserved in changed],
        )
        refresh_runs(db, [run for run, _ in changed])
    return [run for run, _ in changed]


def mark_regressed(db: Transactional, channel_id: Any, detail: str, now: datetime) -> None:
    """Say on run_status that ``channel_id``'s history went back (not an event: past the loss)."""
    p, channel = db.mark, db.adapt(UUID(str(channel_id)))
    db.execute(
        f"INSERT INTO {REGRESSIONS} (channel_id, detail, found_at) VALUES ({p}, {p}, {p}) "
        "ON CONFLICT (channel_id) DO UPDATE SET detail = excluded.detail, "
        "found_at = excluded.found_at",
        (channel, detail, db.adapt(now)),
    )
    rows = db.execute(f"SELECT run_id FROM run_status WHERE channel_id = {p}", (channel,))
    refresh_runs(db, [row[0] for row in rows.fetchall()])
