"""Changes a projection asks for: upsert a row, count, name an effect's run, refresh a run.

Adapters apply a batch's changes in one transaction with the tracking position, so each is applied
exactly once (which lets a :class:`Count` add). Each change is a frozen dataclass with slots: a
catch-up makes one or more per event, and slots build a frozen instance in a third of the time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from actae.projections.tables import Table


@dataclass(frozen=True, slots=True)
class Upsert:
    """Insert the row keyed by ``key`` (a tuple for a composite key), or update these columns."""

    table: Table
    key: Any
    values: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Count:
    """Add ``by`` to ``column`` of the row ``key`` (an :class:`Upsert` of 0 starts it)."""

    table: Table
    key: Any
    column: str
    by: int = 1


@dataclass(frozen=True, slots=True)
class EffectOwner:
    """Fill ``run_id`` and ``effect_key`` of the row keyed by ``key`` from effect ``effect_id``.

    An effect's events after its first name neither its run nor its key; its effects row
    holds both.
    """

    table: Table
    key: Any
    effect_id: UUID


@dataclass(frozen=True, slots=True)
class RefreshRun:
    """Derive a run's standing and effect totals again (by ``run_id`` or one of its effects)."""

    run_id: UUID | None = None
    effect_id: UUID | None = None


@dataclass(frozen=True, slots=True)
class PurgeRun:
    """Retention purged the run: drop its effects rows and its audit rows' details (contents)."""

    run_id: UUID


Change = Upsert | Count | EffectOwner | RefreshRun | PurgeRun
