"""Forgetting a run: the audited event that says its contents are destroyed.

The event is written first, with who and why; the store then destroys the run's data key.
Both steps are idempotent, so a forget interrupted between them is finished by asking
again. No note goes on the run's channel: it would be sealed under the key being destroyed.
"""

from __future__ import annotations

from actae.domain.commands import Forget
from actae.domain.pipeline import Core, retried
from actae.domain.plan import Plan, ask, now, save
from actae.domain.reader import StoreReader
from actae.domain.validation import MAX_REASON_LENGTH, require_text, require_uuid
from actae.domain.values import RunInfo


def forget(command: Forget, core: Core) -> Plan[RunInfo]:
    """Record that the run is forgotten (once); the run as it is afterwards."""
    run_id = require_uuid("run_id", command.run_id)
    actor = require_text("actor", command.actor)
    reason = require_text("reason", command.reason, max_length=MAX_REASON_LENGTH)

    def attempt(_: int) -> Plan[RunInfo]:
        run = yield from ask(StoreReader.run_aggregate, run_id)
        at = yield from now()
        run.forget(actor=actor, reason=reason, at=at)
        if run.pending_events:
            yield from save(run)
        return (yield from ask(StoreReader.run, run_id))

    return (yield from retried(attempt, lambda: f"run {run_id}"))
