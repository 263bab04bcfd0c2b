"""Purging finished runs by retention: the store's collaborator behind ``apply_retention``.

A purge writes the run's tombstone (domain/keeping.py), then deletes the events it
replaces, the run's data key and the artifacts no other run references, a batch of runs per
transaction so that writers are never locked out for long (docs/data.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING
from uuid import UUID

from actae.adapters.custody.holding import Holding
from actae.adapters.runtime.backends import Backend
from actae.adapters.runtime.service import ActaeService
from actae.domain import keeping
from actae.domain.channel import Channel
from actae.domain.errors import NotFoundError
from actae.domain.operation import Operation
from actae.domain.retention import Retention
from actae.domain.run import Run
from actae.domain.values import RetentionReport

if TYPE_CHECKING:
    from actae.adapters.readside.projector import Projector

PURGED_TOPIC = Run.Purged.type_name
BATCH = 100
"""Runs purged per transaction of deletes: short enough that writers never wait long."""
FINISH_WITHIN = timedelta(days=1)
"""How far back a retention pass looks for forgets and purges a crash left unfinished."""


class Purger:
    """Decides which finished runs are due, writes their tombstones, deletes what they replace."""

    def __init__(self, service: ActaeService, holding: Holding, backend: Backend) -> None:
        self._service = service
        self._holding = holding
        self._backend = backend

    def apply(
        self,
        projector: Projector,
        now: datetime,
        *,
        actor: str,
        dry_run: bool,
        limit: int,
        progress: Callable[[int], None] | None,
        started: float,
    ) -> RetentionReport:
        """One retention pass over read models caught up to ``now`` (``Store.apply_retention``)."""
        if not dry_run:
            self._finish_interrupted(projector, now)
        kept = keeping.policies(self._service.reader)
        if kept is None or kept.shortest() is None:
            return _report(dry_run, 0, [], 0, 0, 0, started)
        rules, own = kept.rules(now), kept.own_agents()
        candidates = projector.db.due_runs(rules, own, held=False, limit=limit)
        held = len(projector.db.due_runs(rules, own, held=True, limit=limit))
        due = [run_id for run_id in candidates if self._is_due(kept, run_id, now)]
        if dry_run:
            return _report(True, len(candidates), due, held, 0, 0, started)
        purged: list[UUID] = []
        events = artifacts = 0
        for start in range(0, len(due), BATCH):
            done = [run for run in due[start : start + BATCH] if self._tombstone(run, actor)]
            deleted, dropped = self._delete(done, projector)
            events, artifacts = events + deleted, artifacts + dropped
            purged.extend(done)
            if progress is not None:
                progress(len(purged))
        projector.catch_up()
        return _report(False, len(candidates), purged, held, events, artifacts, started)

    def _is_due(self, kept: Retention, run_id: UUID, now: datetime) -> bool:
        """Whether the run is due and its lineage lets it go, as the purge decides (a dry run)."""
        try:
            run = self._service.reader.run_aggregate(run_id)
            if kept.due(run, now) is None:
                return False
            return keeping.lineage_lets_go(self._service.reader, kept, run, now)
        except NotFoundError:
            return False

    def _tombstone(self, run_id: UUID, actor: str) -> bool:
        """Write the run's tombstone if it is (still) due; whether it was."""
        try:
            tombstone = self._service.call(keeping.purge, run_id, actor=actor)
        except NotFoundError:  # purged meanwhile by another worker
            return False
        return tombstone is not None

    def _delete(self, runs: Sequence[UUID], projector: Projector) -> tuple[int, int]:
        """Delete what the tombstones of ``runs`` replace; how many events and artifacts."""
        if not runs:
            return 0, 0
        everything: list[UUID] = []
        for run_id in runs:
            run = self._service.reader.run_or_tombstone(run_id)
            everything.append(run.channel_id)
            everything.extend(self._operations_of(run))
        keys = projector.db.effect_keys_of(runs)
        everything.extend(Operation.id_for(key) for key in keys)
        deleted = self._backend.delete_events(
            everything_of=sorted(set(everything)), history_of=list(runs), keep_topic=PURGED_TOPIC
        )
        self._service.forget_guesses(everything)  # a write on them would collide with nothing
        self._service.core.seen.forget(everything)  # a key used again starts a new history
        artifacts = sum(self._holding.artifacts.purge(run) for run in runs)
        self._holding.keys.drop(runs)
        return deleted, artifacts

    def _operations_of(self, run: Run) -> set[UUID]:
        """The operation records of the run's own commands (a child's start is its parent's)."""
        mapper = self._service.metadata_mapper
        found: set[UUID] = set()
        own_start = run.parent_run_id is None and run.forked_from is None
        sources = (run.id, run.channel_id) if own_start else (run.channel_id,)
        for aggregate_id in sources:
            for stored in self._service.recorder.select_events(aggregate_id):
                event = mapper.to_domain_event(stored)
                operation_id = getattr(event, "operation_id", None)
                if not own_start and isinstance(event, Channel.Opened):
                    continue  # opened by the parent's command, under the parent's record
                if isinstance(operation_id, str) and isinstance(event, Run.Started | Channel.Event):
                    found.add(Operation.id_for(operation_id))
        return found

    def _finish_interrupted(self, projector: Projector, now: datetime) -> None:
        """Finish the forgets and purges of the last day that a crash cut short (a few queries)."""
        since = now - FINISH_WITHIN
        keys = self._holding.keys
        forgotten = [run_id for run_id, _ in projector.db.recently("forgotten_at", since)]
        for run_id, live in keys.present(forgotten).items():
            if live:
                keys.forget(run_id)
        purged = dict(projector.db.recently("purged_at", since))
        if not purged:
            return
        with_events = self._backend.still_stored(list(purged.values()))
        with_keys = keys.present(list(purged))
        unfinished = [
            r for r, channel in purged.items() if channel in with_events or r in with_keys
        ]
        self._delete(unfinished, projector)


def _report(
    dry_run: bool,
    examined: int,
    purged: list[UUID],
    held: int,
    events: int,
    artifacts: int,
    started: float,
) -> RetentionReport:
    return RetentionReport(
        dry_run=dry_run,
        examined=examined,
        purged=purged,
        held=held,
        events_deleted=events,
        artifacts_deleted=artifacts,
        seconds=time.monotonic() - started,
    )
