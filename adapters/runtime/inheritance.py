"""A forked run's workflow code replays what its ancestors recorded before the fork boundary.

A fork's child has a run id of its own, so its calls miss the parent's records: forking a
finished research -> draft -> send run would send the email again. ``RunContext`` asks here
after its own records miss; what the parent recorded up to the boundary is returned.
"""

from __future__ import annotations

from typing import Any

from actae.adapters.runtime.service import ActaeService
from actae.domain import ledger
from actae.domain.effects import EffectStatus, workflow_value
from actae.domain.errors import EffectBlockedError
from actae.domain.inheritance import Prefix, call_suffix, prefix_of
from actae.domain.values import ChannelEvent, RunInfo
from actae.domain.waits import Decision


class Inheritance:
    """What a run inherits from the run it was forked from (nothing, unless it is a fork)."""

    def __init__(self, service: ActaeService, run: RunInfo) -> None:
        self._service = service
        self._run = run
        self._prefix: Prefix | None = None

    def _inherited(self, table: str, key: str) -> Any:
        """The prefix's entry of ``table`` for ``key`` (``None`` unless the run is a fork)."""
        if self._run.forked_from is None:
            return None
        if self._prefix is None:  # read once
            self._prefix = prefix_of(self._service.reader, self._run.forked_from)
        return getattr(self._prefix, table).get(call_suffix(self._run.run_id, key) or key)

    def call(self, key: str) -> ChannelEvent | None:
        """The ancestor's event recording the call named ``key``, if it is in the prefix."""
        found: ChannelEvent | None = self._inherited("calls", key)
        return found

    def decision(self, name: str) -> Decision | None:
        """An approval, signal or timer an ancestor received at or before the boundary."""
        found: Decision | None = self._inherited("decisions", name)
        return found

    def effect(self, key: str) -> tuple[bool, Any]:
        """``(True, result)`` if an ancestor's effect stands for ``key``; else ``(False, None)``.

        Never started again under the child's key (two keys would make it happen twice): until
        the parent's ledger has a result the child is blocked; abandoned, it is the child's.
        """
        found = self._inherited("effects", key)
        # The child's own outcome for ``key`` counts first.
        if found is None or self._service.call(ledger.find_effect, key) is not None:
            return False, None
        parent = self._service.call(ledger.effect, found.effect_key)
        if parent.status is EffectStatus.COMPLETED:
            return True, workflow_value(parent.result)
        if parent.status is EffectStatus.ABANDONED:
            return False, None
        raise EffectBlockedError(
            found.effect_key,
            status=parent.status.value,
            detail=(
                f"the fork {self._run.run_id} inherited this unfinished effect from its "
                "parent; once the parent's effect completes (or is overridden) the fork "
                "replays its outcome, and once it is abandoned the fork runs its own"
            ),
        )
