"""What is going on in a store, for someone on call: lists and one run in full.

Lists come from the read models (one indexed query each, whatever the history length). A
command that runs once catches them up first (:func:`fresh`), so a list never misses a run
that started a moment ago; a long-running reader (the console) leaves that to its live
projector and at most waits for it (:func:`caught_up`), so that reading writes nothing. A
run's own view adds the store's word on it (``store.run``): status, waiting reason, pins,
cursor and state version as the event log has them, not as a projection last saw them.

Every row is typed (:func:`actae.adapters.operate.rows.typed`), so the CLI and the console
print the same values on every backend.
"""

# ruff: noqa: S608 - SQL assembled from our own constant table and column names; values are bound

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any
from uuid import UUID

from actae.adapters.operate.rows import typed
from actae.adapters.runtime.store import Store
from actae.domain.errors import NotFoundError, ValidationError
from actae.domain.status import RUNNING_STATUSES, RunFacts, next_action
from actae.domain.validation import require_int, require_text
from actae.domain.values import RunInfo, RunStatus
from actae.projections.tables import TABLES, Table

PAGE = 50
"""Rows a list returns when not told how many."""
MOST = 1000
"""The most rows one list returns (page with ``after``)."""


def table(name: str) -> Table:
    """The read-model table called ``name``."""
    return next(t for t in TABLES if t.name == name)


def fresh(store: Store) -> None:
    """Bring the read models up to date, so a list shows what the log holds now.

    It does the projector's work here, in a write transaction (on SQLite, ``BEGIN
    IMMEDIATE``): right for a command that runs once, or after an action that must show its
    own change, not for every read of a server that runs a live projector.
    """
    store.projector().catch_up()


FIRST_LOOK = 0.002
LOOK_AT_MOST_EVERY = 0.05
"""Seconds between looks at the read models' position while waiting (doubling up to the most)."""


def caught_up(store: Store, within: float) -> bool:
    """Wait up to ``within`` seconds for the read models to reflect every event stored now.

    Whether they do. It only reads positions (the store's and the read models'): a live
    projector (``projector.start()``, ``actae project``) does the work, nothing is written
    here. With no projector running it returns ``False`` after ``within``.
    """
    target = store.position()
    projector = store.projector()
    ends = time.monotonic() + within
    pause = FIRST_LOOK
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
    projector = store.projector()
    db = projector.db
    rows = db.query(statement(db.mark), [db.adapt(value) for value in params])
    return [typed(table(of), row) for row in rows]


def rows_where(
    store: Store, of: str, column: str, value: Any, order: str = ""
) -> list[dict[str, Any]]:
    """Typed rows of the table ``of`` whose ``column`` is ``value``, in ``order`` if given."""
    ordered = f" ORDER BY {order}" if order else ""
    return select(store, of, lambda p: f"SELECT * FROM {of} WHERE {column} = {p}{ordered}", [value])


def limit_of(limit: int | None) -> int:
    """``limit`` checked (1 to :data:`MOST`), or :data:`PAGE` when not given."""
    return PAGE if limit is None else require_int("limit", limit, minimum=1, maximum=MOST)


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
        conditions["status = {p}"] = status_in(RunStatus, status)
    for column, value in (("workflow_id", workflow), ("agent_id", agent)):
        if value is not None:
            conditions[f"{column} = {{p}}"] = require_text(column, value)
    if after is not None:
        conditions[
            "(created_at, run_id) < (SELECT created_at, run_id FROM run_status WHERE run_id = {p})"
        ] = after
    return select(
        store,
        "run_status",
        lambda p: (
            f"SELECT * FROM run_status {_where(conditions, p)} "
            f"ORDER BY created_at DESC, run_id DESC LIMIT {p}"
        ),
        [*conditions.values(), limit_of(limit)],
    )


def _where(conditions: dict[str, Any], mark: str) -> str:
    """``WHERE`` and the conditions (each with its ``{p}`` mark filled), or nothing."""
    if not conditions:
        return ""
    return "WHERE " + " AND ".join(c.format(p=mark) for c in conditions)


def status_in(kind: type[StrEnum], status: str) -> str:
    """``status`` if it is one of ``kind``, else a ``ValidationError`` naming the valid ones."""
    try:
        return kind(status).value
    except ValueError:
        names = ", ".join(s.value for s in kind)
        raise ValidationError("status", f"expected one of {names}, got {status!r}") from None


def status_counts(
    store: Store, of: str = "run_status", kind: type[StrEnum] = RunStatus
) -> dict[str, int]:
    """How many rows of ``of`` have each status of ``kind`` (every one listed, zeros included)."""
    rows = store.projector().db.query(f"SELECT status, count(*) AS n FROM {of} GROUP BY status")
    return {s.value: 0 for s in kind} | {str(row["status"]): int(row["n"]) for row in rows}


def effects(
    store: Store, *, in_doubt: bool = False, run_id: UUID | None = None, limit: int | None = None
) -> list[dict[str, Any]]:
    """Ledger effects, most recently changed first: all, a run's, or the ones in doubt."""
    conditions: dict[str, Any] = {}
    if in_doubt:
        conditions["in_doubt = {p}"] = True
    if run_id is not None:
        conditions["run_id = {p}"] = run_id
    return select(
        store,
        "effects",
        lambda p: (
            f"SELECT * FROM effects {_where(conditions, p)} "
            f"ORDER BY updated_at DESC, effect_key LIMIT {p}"
        ),
        [*conditions.values(), limit_of(limit)],
    )


def audit(store: Store, run_id: UUID) -> list[dict[str, Any]]:
    """Every operator action on the run and its effects, oldest first."""
    return rows_where(store, "audit", "run_id", run_id, "at, aggregate_id, version")


def edges(store: Store, run_id: UUID) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The run's lineage rows: where it came from (fork or parent), its forks and children."""
    up = rows_where(store, "lineage", "child_run_id", run_id)
    return up, rows_where(store, "lineage", "parent_run_id", run_id, "created_at")


@dataclass(frozen=True)
class RunView:
    """One run in full: the store's word on it and what the read models derive."""

    info: RunInfo
    row: dict[str, Any] | None
    """Its run_status row (``None`` until the projector has seen the run)."""
    effects: list[dict[str, Any]] = field(default_factory=list)
    parents: list[dict[str, Any]] = field(default_factory=list)
    children: list[dict[str, Any]] = field(default_factory=list)

    @property
    def status(self) -> str:
        """Retrying or blocked as the effects make it, else the run's own status.

        The read model's word once the projector has seen the run, else the store's: both
        are the domain's rule (:mod:`actae.domain.status`) applied to the run's facts.
        """
        return str(self.row["status"]) if self.row else self.info.status.value

    @property
    def lifecycle(self) -> str:
        """The run's own status (running, waiting, paused, how it ended), its effects aside."""
        if self.row and self.row.get("lifecycle"):
            return str(self.row["lifecycle"])
        return facts_of_info(self.info).lifecycle.value

    @property
    def next_action(self) -> str:
        """What should happen next: the read model's word, or the rule on the store's."""
        if self.row:
            return str(self.row["next_action"])
        return next_action(facts_of_info(self.info))


def facts_of_info(info: RunInfo) -> RunFacts:
    """What the store's own view of a run tells of its standing (no effect keys, no workers).

    A run the projector has not seen yet has no effect in the read models' tables; its
    status already says what its open effects make it (``store.run``).
    """
    waiting = info.waiting
    lifecycle = info.status if info.status not in RUNNING_STATUSES else RunStatus.RUNNING
    return RunFacts(
        lifecycle=lifecycle,
        forgotten=info.forgotten_at is not None,
        waiting_reason=None if waiting is None else waiting.reason,
        waiting_name=None if waiting is None else waiting.name,
        escalated=waiting is not None and waiting.escalated,
        error=info.error,
        agent_id=info.agent_id,
    )


def run_view(store: Store, run_id: UUID) -> RunView:
    """The run ``run_id`` in full (``NotFoundError`` for a run the store never saw)."""
    info = store.run(run_id)
    rows = rows_where(store, "run_status", "run_id", run_id)
    parents, children = edges(store, run_id)
    return RunView(
        info=info,
        row=rows[0] if rows else None,
        effects=effects(store, run_id=run_id, limit=MOST),
        parents=parents,
        children=children,
    )


def effect_row(store: Store, effect_key: str) -> dict[str, Any]:
    """The effects row of ``effect_key`` (``NotFoundError`` if the ledger has none)."""
    rows = rows_where(store, "effects", "effect_key", effect_key)
    if not rows:
        raise NotFoundError("effect", effect_key)
    return rows[0]
