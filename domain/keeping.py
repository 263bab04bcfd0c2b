"""What the store keeps of a run: forgetting its contents, legal holds, retention.

Each is an audited event with its actor (and reason). Forgetting is written first and the
store then destroys the run's data key; a purge is written first as the run's tombstone
and the store then deletes the events it replaces. Both second steps are idempotent, so an
interrupted one is finished by asking again.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from uuid import UUID

from actae.domain.commands import Forget, Hold, OperatorAction, Purge, Release, SetRetention
from actae.domain.errors import NotFoundError
from actae.domain.pipeline import Core, retried
from actae.domain.plan import Plan, ask, now, save
from actae.domain.reader import StoreReader
from actae.domain.retention import RETENTION_ID, Retention, require_agent, require_policy
from actae.domain.run import Run
from actae.domain.validation import MAX_REASON_LENGTH, require_text, require_uuid
from actae.domain.values import RunInfo

Move = Callable[..., None]
"""A Run method taking ``actor``, ``reason`` and ``at``."""


def forget(command: Forget, core: Core) -> Plan[RunInfo]:
    """Record that the run is forgotten (once).

    No note goes on its channel: it would be sealed under the key being destroyed.
    """
    return (yield from _moved(command, Run.forget))


def hold(command: Hold, core: Core) -> Plan[RunInfo]:
    """Place a legal hold (holding a held run changes nothing)."""
    return (yield from _moved(command, Run.hold))


def release(command: Release, core: Core) -> Plan[RunInfo]:
    """Lift the legal hold (releasing a run not held changes nothing)."""
    return (yield from _moved(command, Run.release))


def _moved(command: OperatorAction, move: Move) -> Plan[RunInfo]:
    run_id = require_uuid("run_id", command.run_id)
    actor = require_text("actor", command.actor)
    reason = require_text("reason", command.reason, max_length=MAX_REASON_LENGTH)

    def attempt(_: int) -> Plan[RunInfo]:
        run = yield from ask(StoreReader.run_aggregate, run_id)
        at = yield from now()
        move(run, actor=actor, reason=reason, at=at)
        if run.pending_events:
            yield from save(run)
        return (yield from ask(StoreReader.run, run_id))

    return (yield from retried(attempt, lambda: f"run {run_id}"))


def policies() -> Plan[Retention | None]:
    """The store's retention policies (``None``: none was ever set)."""
    try:
        return (yield from ask(StoreReader.aggregate, RETENTION_ID, Retention))
    except NotFoundError:
        return None


def set_retention(command: SetRetention, core: Core) -> Plan[Retention]:
    """Set (or replace) a policy, audited with its actor; the policies afterwards."""
    policy = require_policy("policy", command.policy)
    agent = require_agent(command.agent)
    actor = require_text("actor", command.actor)

    def attempt(_: int) -> Plan[Retention]:
        current = yield from policies()
        at: datetime = yield from now()
        if current is None:
            current = Retention.define(agent=agent, keep=policy, actor=actor, at=at)
        else:
            current.change(agent=agent, keep=policy, actor=actor, at=at)
        yield from save(current)
        return current

    return (yield from retried(attempt, lambda: "the retention policies"))


def purge(command: Purge, core: Core) -> Plan[Run.Purged | None]:
    """Write the run's tombstone if a policy says it is due now; the tombstone, else ``None``.

    Decided on the run as stored, so a hold placed meanwhile, a retry, or another worker's
    purge of the same run wins: the tombstone is appended after the run's last event, and
    a lost race is decided again from fresh state.
    """
    actor = require_text("actor", command.actor)

    def attempt(_: int) -> Plan[Run.Purged | None]:
        kept = yield from policies()
        if kept is None:
            return None
        run = yield from ask(StoreReader.run_aggregate, command.run_id)
        at: datetime = yield from now()
        why = kept.due(run, at)
        if why is None or not (yield from lineage_lets_go(kept, run, at)):
            return None
        head = yield from ask(StoreReader.head_event, run.channel_id)
        run.purge(
            cursor=head.originator_version,
            state_version=head.state_version,
            usage=dict(head.usage),
            events=run.version + head.originator_version,
            policy=why,
            actor=actor,
            at=at,
        )
        yield from save(run)
        return run.tombstone

    return (yield from retried(attempt, lambda: f"run {command.run_id}"))


def lineage_lets_go(kept: Retention, run: Run, at: datetime) -> Plan[bool]:
    """Whether every run that inherits from ``run`` lets it be purged now.

    Its forks and delegated children, and theirs, read from the store: a hold on any of
    them protects the runs it inherits from, and a parent goes only once each descendant
    has ended and passed its own window (is due itself, or purged already). A fork
    replays the prefix it inherited and a child's result is its parent's to keep, so the
    parent must outlive them.
    """
    seen: set[UUID] = {run.id}
    waiting = [*_inheritors(run)]
    while waiting:
        run_id = waiting.pop()
        if run_id in seen:
            continue
        seen.add(run_id)
        descendant = yield from ask(StoreReader.run_or_tombstone, run_id)
        if descendant.purged_at is None and kept.due(descendant, at) is None:
            return False
        waiting.extend(_inheritors(descendant))
    return True


def _inheritors(run: Run) -> list[UUID]:
    """The runs made from ``run``: its forks, then its delegated children."""
    return [fork.child_run_id for fork in run.forks] + list(run.children)
