"""What the store keeps of a run: forgetting its contents, legal holds, retention.

Forgetting and purging are written first; the store then destroys the data key or deletes the
events, idempotently, so an interrupted step is finished by asking again.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any
from uuid import UUID

from actae.domain.errors import NotFoundError
from actae.domain.lifecycle import operated
from actae.domain.pipeline import Shell, retried
from actae.domain.reader import StoreReader
from actae.domain.retention import RETENTION_ID, Retention, policy_view, require_policy
from actae.domain.run import Run
from actae.domain.validation import require_text, require_uuid
from actae.domain.values import RunInfo


def forget(shell: Shell, run_id: UUID | str, *, actor: str, reason: str) -> RunInfo:
    """Record that the run is forgotten (once, no note); the store then destroys its data key."""
    return operated(shell, require_uuid("run_id", run_id), actor, reason, None, Run.forget)


def hold(shell: Shell, run_id: UUID | str, *, actor: str, reason: str) -> RunInfo:
    """Place a legal hold: retention never purges the run until it is released."""
    return operated(shell, require_uuid("run_id", run_id), actor, reason, None, Run.hold)


def release(shell: Shell, run_id: UUID | str, *, actor: str, reason: str) -> RunInfo:
    """Lift the legal hold: retention applies to the run again."""
    return operated(shell, require_uuid("run_id", run_id), actor, reason, None, Run.release)


def policies(reader: StoreReader) -> Retention | None:
    """The store's retention policies (``None``: none was ever set)."""
    try:
        return reader.aggregate(RETENTION_ID, Retention)
    except NotFoundError:
        return None


def retention(shell: Shell) -> dict[str, dict[str, str] | None]:
    """The policies in force: ``{"default": {"completed": "7d"}, "billing": None}``."""
    kept = policies(shell.reader)
    return {} if kept is None else policy_view(kept.policies)


def set_retention(
    shell: Shell, policy: Mapping[str, Any] | None, *, agent: str | None = None, actor: str
) -> dict[str, dict[str, str] | None]:
    """Keep finished runs for a while after they end, by status (``None``: forever); all policies.

    ``set_retention({"completed": "7d", "failed": "30d"}, actor=...)`` sets the default, ``agent=``
    that agent's; durations as :func:`~actae.domain.retention.require_duration` reads them.
    """
    keep = require_policy("policy", policy)
    agent = None if agent is None else require_text("agent", agent)  # None: the default
    actor = require_text("actor", actor)

    def attempt(_: int) -> Retention:
        current = policies(shell.reader)
        at = shell.now()
        if current is None:
            current = Retention.define(agent=agent, keep=keep, actor=actor, at=at)
        else:
            current.change(agent=agent, keep=keep, actor=actor, at=at)
        shell.save(current)
        return current

    return policy_view(retried(shell, attempt, lambda: "the retention policies").policies)


def purge(shell: Shell, run_id: UUID, *, actor: str) -> Run.Purged | None:
    """Write the run's tombstone if a policy says it is due now (decided on the stored run)."""
    actor = require_text("actor", actor)
    reader = shell.reader

    def attempt(_: int) -> Run.Purged | None:
        kept = policies(reader)
        if kept is None:
            return None
        run = reader.run_aggregate(run_id)
        at = shell.now()
        why = kept.due(run, at)
        if why is None or not lineage_lets_go(reader, kept, run, at):
            return None
        head = reader.head_event(run.channel_id)
        run.purge(
            cursor=head.originator_version,
            state_version=head.state_version,
            usage=dict(head.usage),
            events=run.version + head.originator_version,
            policy=why,
            actor=actor,
            at=at,
        )
        shell.save(run)
        return run.tombstone

    return retried(shell, attempt, lambda: f"run {run_id}")


def lineage_lets_go(reader: StoreReader, kept: Retention, run: Run, at: datetime) -> bool:
    """Whether every fork or child of ``run`` (they inherit from it) is due or purged too."""
    seen: set[UUID] = {run.id}
    waiting = [*_inheritors(run)]
    while waiting:
        run_id = waiting.pop()
        if run_id in seen:
            continue
        seen.add(run_id)
        descendant = reader.run_or_tombstone(run_id)
        if descendant.purged_at is None and kept.due(descendant, at) is None:
            return False
        waiting.extend(_inheritors(descendant))
    return True


def _inheritors(run: Run) -> list[UUID]:
    """The runs made from ``run``: its forks, then its delegated children."""
    return [fork.child_run_id for fork in run.forks] + list(run.children)
