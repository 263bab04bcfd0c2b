"""What the store keeps of a run: forgetting its contents, legal holds, retention.

Each is an audited event with its actor (and reason). Forgetting is written first and the
store then destroys the run's data key; a purge is written first as the run's tombstone
and the store then deletes the events it replaces. Both second steps are idempotent, so an
interrupted one is finished by asking again.
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
from actae.domain.retention import (
    RETENTION_ID,
    Retention,
    policy_view,
    require_agent,
    require_policy,
)
from actae.domain.run import Run
from actae.domain.validation import require_text, require_uuid
from actae.domain.values import RunInfo


def forget(shell: Shell, run_id: UUID | str, *, actor: str, reason: str) -> RunInfo:
    """Record that the run is forgotten (once); the store then destroys its data key.

    No note goes on its channel: it would be sealed under the key being destroyed.
    """
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
    """Keep finished runs for a while after they end, by status; ``None``: forever.

    ``set_retention({"completed": "7d", "failed": "30d", "cancelled": "7d"}, actor=...)``
    sets the store's default; with ``agent=`` the policy of that agent's runs, which
    replaces the default for them. A status a policy does not name is kept forever.
    Durations: ``"45s"``, ``"30m"``, ``"12h"``, ``"7d"``, ``"2w"``, ``"7y"``, seconds or
    a ``timedelta``. Stored as an audited event, so every worker applies the same
    policies. Returns them all, as :meth:`retention` does.
    """
    keep = require_policy("policy", policy)
    agent = require_agent(agent)
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
    """Write the run's tombstone if a policy says it is due now; the tombstone, else ``None``.

    Decided on the run as stored (a lost race again on fresh state), so a hold placed
    meanwhile, a retry or another worker's purge wins.
    """
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
    """Whether every run that inherits from ``run`` lets it be purged now.

    A fork replays its inherited prefix and a child's result is its parent's, so a parent
    goes only once every descendant (read from the store) is due or purged: a hold on any
    of them keeps it.
    """
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
