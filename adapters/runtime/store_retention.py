"""The retention part of the public store: policies, legal holds, purging finished runs.

:class:`actae.adapters.runtime.store.Store` inherits these. A purge writes the run's
tombstone (domain/keeping.py), then deletes the events it replaces, the run's data key
and the artifacts no other run references, a batch of runs per transaction so that
writers are never locked out for long (docs/data.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TextIO
from uuid import UUID

from actae.adapters.custody.holding import Holding
from actae.adapters.runtime.backends import Backend
from actae.adapters.runtime.service import ActaeService
from actae.domain import keeping
from actae.domain.channel import Channel
from actae.domain.commands import Hold, Purge, Release, SetRetention
from actae.domain.errors import NotFoundError
from actae.domain.operation import Operation
from actae.domain.retention import Retention, policy_view
from actae.domain.run import Run
from actae.domain.validation import require_int, require_text
from actae.domain.values import RetentionReport, RunInfo

if TYPE_CHECKING:
    from datetime import datetime

    from actae.adapters.readside.projector import Projector

PURGED_TOPIC = Run.Purged.type_name
BATCH = 100
"""Runs purged per transaction of deletes: short enough that writers never wait long."""
FINISH_WITHIN = timedelta(days=1)
"""How far back a retention pass looks for forgets and purges a crash left unfinished."""


class RetentionMethods:
    """``Store`` methods that decide how long finished runs are kept, and purge them."""

    _service: ActaeService
    _holding: Holding
    _backend: Backend

    if TYPE_CHECKING:

        def projector(self, *, batch_size: int = ..., out: TextIO | None = ...) -> Projector:
            """The store's read models."""
            ...

        def now(self) -> datetime:
            """The store's clock."""
            ...

    def set_retention(
        self, policy: Mapping[str, Any] | None, *, agent: str | None = None, actor: str
    ) -> dict[str, dict[str, str] | None]:
        """Keep finished runs for a while after they end, by status; ``None``: forever.

        ``set_retention({"completed": "7d", "failed": "30d", "cancelled": "7d"}, actor=...)``
        sets the store's default; with ``agent=`` the policy of that agent's runs, which
        replaces the default for them. A status a policy does not name is kept forever.
        Durations: ``"45s"``, ``"30m"``, ``"12h"``, ``"7d"``, ``"2w"``, ``"7y"``, seconds or
        a ``timedelta``. Stored as an audited event, so every worker applies the same
        policies. Returns them all, as :meth:`retention` does.
        """
        command = SetRetention(policy=policy, agent=agent, actor=actor)
        return policy_view(self._service.execute(keeping.set_retention, command).policies)

    def retention(self) -> dict[str, dict[str, str] | None]:
        """The policies in force: ``{"default": {"completed": "7d"}, "billing": None}``."""
        kept = self._service.run(keeping.policies())
        return {} if kept is None else policy_view(kept.policies)

    def hold(self, run_id: UUID | str, *, actor: str, reason: str) -> RunInfo:
        """Place a legal hold: retention never purges the run until it is released."""
        return self._service.execute(keeping.hold, Hold(run_id=run_id, actor=actor, reason=reason))

    def release(self, run_id: UUID | str, *, actor: str, reason: str) -> RunInfo:
        """Lift the legal hold: retention applies to the run again."""
        command = Release(run_id=run_id, actor=actor, reason=reason)
        return self._service.execute(keeping.release, command)

    def apply_retention(
        self,
        *,
        actor: str,
        dry_run: bool = False,
        limit: int = 10_000,
        progress: Callable[[int], None] | None = None,
    ) -> RetentionReport:
        """Purge the finished runs whose end plus their policy's time has passed.

        A purge keeps the run's tombstone (``store.run`` reports ``purged_at``, its
        workflow, dates, counts, the policy and ``actor``) and its lineage; it deletes its
        events, its data key and the artifacts no other run references. A run on hold is
        never purged, nor one whose forks or delegated children (and theirs) are held, live
        or within their own window; a fork keeps its own copy of the state it started
        from. At most ``limit`` runs per call (workers call it periodically); ``dry_run``
        says what would go and changes nothing. ``progress`` is told how many were purged
        after each batch. A purge or a forget that a crash
        interrupted (its event written, its deletes not) is finished first.
        """
        started = time.monotonic()
        actor = require_text("actor", actor)
        limit = require_int("limit", limit, minimum=1)
        projector = self.projector()
        projector.catch_up()
        now = self.now()
        if not dry_run:
            self._finish_interrupted(projector, now)
        kept = self._service.run(keeping.policies())
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

    # -- internals ------------------------------------------------------------------------

    def _is_due(self, kept: Retention, run_id: UUID, now: datetime) -> bool:
        """Whether the stored run is due, and every run inheriting from it lets it go.

        The same decision the purge makes (:func:`keeping.lineage_lets_go`), so a dry run
        lists what a pass would purge.
        """
        try:
            run = self._service.reader.run_aggregate(run_id)
            if kept.due(run, now) is None:
                return False
            return self._service.run(keeping.lineage_lets_go(kept, run, now))
        except NotFoundError:
            return False

    def _tombstone(self, run_id: UUID, actor: str) -> bool:
        """Write the run's tombstone if it is (still) due; whether it was."""
        try:
            tombstone = self._service.execute(keeping.purge, Purge(run_id=run_id, actor=actor))
        except NotFoundError:  # purged meanwhile by another worker
            return False
        return tombstone is not None

    def _delete(self, runs: Sequence[UUID], projector: Projector) -> tuple[int, int]:
        """Delete what the tombstones of ``runs`` replace; how many events and artifacts.

        The events in one transaction; then the runs' data keys and unshared artifacts.
        """
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
            everything_of=sorted(set(everything)),
            history_of=list(runs),
            keep_topic=PURGED_TOPIC,
        )
        self._service.forget_guesses(everything)  # a write on them would collide with nothing
        self._service.core.seen.forget(everything)  # a key used again starts a new history
        artifacts = sum(self._holding.artifacts.purge(run) for run in runs)
        self._holding.keys.drop(runs)
        return deleted, artifacts

    def _operations_of(self, run: Run) -> set[UUID]:
        """The operation records of the run's own commands, named by its events (unopened).

        A child's or a fork's start is recorded under its parent's command (the parent's
        checkpoint of starting it): that record stays, so the parent's replay finds it.
        """
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
        """Finish the forgets and purges of the last day that a crash cut short.

        A few queries per 500 runs (which still have events, which still have keys), so
        that a day of ordinary purges costs a pass little.
        """
        since = now - FINISH_WITHIN
        keys = self._holding.keys
        forgotten = [run_id for run_id, _ in projector.db.recently("forgotten_at", since)]
        for run_id, live in keys.present(forgotten).items():
            if live:
                keys.forget(run_id)
        purged = dict(projector.db.recently("purged_at", since))
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
