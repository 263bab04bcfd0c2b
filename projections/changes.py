"""Changes a projection asks for: upsert some columns of a row, refresh a run's status.

Projections are pure: they turn one domain event into a list of changes and never touch a
database. Adapters coalesce the changes of a batch and apply them in one transaction,
together with the tracking position.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from actae.projections.tables import Table


@dataclass(frozen=True)
class Upsert:
    """Insert the row keyed by ``key``, or update just these columns of it."""

    table: Table
    key: Any
    values: dict[str, Any]


@dataclass(frozen=True)
class RefreshRun:
    """Recompute the derived columns of a run (status, next action, attempts) from effects.

    Exactly one of ``run_id`` and ``effect_id`` (the run of that effect) is given.
    """

    run_id: UUID | None = None
    effect_id: UUID | None = None


Change = Upsert | RefreshRun
