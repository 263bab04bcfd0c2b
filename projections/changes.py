"""Changes a projection asks for: upsert a row, count, name an effect's run, refresh a run.

Projections are pure: they turn one domain event into a list of changes and never touch a
database. Adapters coalesce the changes of a batch and apply them in one transaction,
together with the tracking position, so each change is applied exactly once; that is what
lets a :class:`Count` add to a column instead of setting it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from actae.projections.tables import Table


@dataclass(frozen=True)
class Upsert:
    """Insert the row keyed by ``key``, or update just these columns of it.

    ``key`` is the key column's value, or a tuple of values for a table with a composite key.
    """

    table: Table
    key: Any
    values: dict[str, Any]


@dataclass(frozen=True)
class Count:
    """Add ``by`` to ``column`` of the row keyed by ``key`` (the row is made if missing).

    For what no event states, only implies one more of: a run's steps done. The column must
    start at a value (an :class:`Upsert` of 0 when the row begins), else it stays null.
    """

    table: Table
    key: Any
    column: str
    by: int = 1


@dataclass(frozen=True)
class EffectOwner:
    """Fill ``run_id`` and ``effect_key`` of the row keyed by ``key`` from effect ``effect_id``.

    An effect's events after its first name neither its run nor its key; its effects row
    holds both.
    """

    table: Table
    key: Any
    effect_id: UUID


@dataclass(frozen=True)
class RefreshRun:
    """Derive a run's columns again: its standing (the domain's rule) and its effects' totals.

    Exactly one of ``run_id`` and ``effect_id`` (the run of that effect) is given.
    """

    run_id: UUID | None = None
    effect_id: UUID | None = None


@dataclass(frozen=True)
class PurgeRun:
    """Retention purged the run: drop its effects rows and the details of its audit rows.

    Its ``run_status``, ``lineage`` and ``usage`` rows stay (metadata), as does who did
    what in ``audit``; the effects' result summaries and the audit details may hold
    contents, and the events they came from are gone.
    """

    run_id: UUID


Change = Upsert | Count | EffectOwner | RefreshRun | PurgeRun
