"""The tool-execution-ledger part of the public store: claim, heartbeat, complete, fail.

Each method builds its command value and runs it through the ledger's decide function
(``domain/ledger.py``), which checks the input and explains refusals;
:class:`actae.adapters.runtime.store.Store` inherits these.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from uuid import UUID

from actae.adapters.runtime.service import ActaeService
from actae.domain import ledger
from actae.domain.commands import (
    Abandon,
    ClaimEffect,
    CompleteEffect,
    DoubtEffect,
    FailEffect,
    Heartbeat,
    Override,
    Reconcile,
)
from actae.domain.effects import Claim, EffectInfo, RetryPolicy
from actae.domain.errors import NotFoundError
from actae.domain.redaction import Redactor


class LedgerMethods:
    """``Store`` methods for side effects: the ledger's leases, outcomes and overrides."""

    _service: ActaeService

    def claim(
        self,
        effect_key: str,
        *,
        run_id: UUID | str,
        worker: str,
        lease: float,
        request: dict[str, Any] | None = None,
        retry: RetryPolicy | Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> Claim:
        """Claim a side effect under a lease of ``lease`` seconds.

        The attempt must be over ``timeout`` seconds after the claim (default: the lease):
        its ``deadline``, on the store's clock, recorded with the claim. Heartbeats extend
        the lease, never the deadline; nobody takes the effect over (claims, reconciles,
        retries it) before it has passed, and a completion after it is refused
        (``DeadlinePassedError``): record it with :meth:`doubt_effect`.

        Returns a granted :class:`Claim` with a fencing token (pass it to the provider and
        to heartbeat/complete/fail), or ``status="completed"`` with the recorded result.
        Raises ``LeaseHeldError`` while another worker's lease is live, ``RetryNotDueError``
        before a scheduled retry, ``EffectBlockedError`` when it needs review. The ``retry``
        policy given with the first claim of an effect applies to all its attempts.
        """
        command = ClaimEffect(
            effect_key=effect_key,
            run_id=run_id,
            worker=worker,
            lease=lease,
            request=request,
            retry=retry,
            timeout=timeout,
        )
        return self._service.execute(ledger.claim_effect, command)

    def heartbeat(self, effect_key: str, *, token: int, worker: str, lease: float) -> EffectInfo:
        """Extend the lease of the claim holding ``token``, granted to ``worker``."""
        command = Heartbeat(effect_key=effect_key, token=token, worker=worker, lease=lease)
        return self._service.execute(ledger.heartbeat, command)

    def complete_effect(
        self,
        effect_key: str,
        *,
        token: int,
        worker: str,
        result: dict[str, Any],
        redact: Redactor | None = None,
    ) -> EffectInfo:
        """Record that the effect happened; a stale ``token`` raises ``FencingError``.

        ``worker`` must be the name the claim was granted to (``NotHolderError`` otherwise):
        a token is visible to anyone who reads the effect, the holder's name pairs with it.
        ``redact`` removes secrets from ``result`` before the store's own redactor does
        (docs/data.md).
        """
        command = CompleteEffect(
            effect_key=effect_key, token=token, worker=worker, result=result, redact=redact
        )
        return self._service.execute(ledger.complete_effect, command)

    def doubt_effect(self, effect_key: str, *, token: int, worker: str, reason: str) -> EffectInfo:
        """The holder records that its attempt may or may not have happened: in doubt now.

        For an answer that came after the attempt's deadline, or a call cancelled at it.
        Nobody may run the effect again before the deadline; after it, the next claim is in
        doubt and settles it (reconcile, idempotent retry or review).
        """
        command = DoubtEffect(effect_key=effect_key, token=token, worker=worker, reason=reason)
        return self._service.execute(ledger.doubt_effect, command)

    def fail_effect(
        self,
        effect_key: str,
        *,
        token: int,
        worker: str,
        error: str,
        retry_after: float | str | None = None,
        final: bool = False,
    ) -> EffectInfo:
        """Record a failed attempt; the retry policy (and ``retry_after``) schedules the next.

        ``worker`` is the claim's holder, as for :meth:`complete_effect`. ``retry_after`` is
        seconds, or an HTTP ``Retry-After`` header's value as it came (``"30"`` or an HTTP
        date).
        """
        command = FailEffect(
            effect_key=effect_key,
            token=token,
            worker=worker,
            error=error,
            retry_after=retry_after,
            final=final,
        )
        return self._service.execute(ledger.fail_effect, command)

    def reconcile(
        self,
        effect_key: str,
        outcome: str,
        *,
        actor: str,
        evidence: dict[str, Any] | None = None,
        result: dict[str, Any] | None = None,
        token: int | None = None,
    ) -> EffectInfo:
        """Settle an effect in doubt: ``"completed"`` (with ``result``) or ``"failed"``."""
        command = Reconcile(
            effect_key=effect_key,
            outcome=outcome,
            actor=actor,
            evidence=evidence,
            result=result,
            token=token,
        )
        return self._service.execute(ledger.reconcile, command)

    def abandon(self, effect_key: str, *, actor: str, reason: str) -> EffectInfo:
        """Give up on an effect for good."""
        command = Abandon(effect_key=effect_key, actor=actor, reason=reason)
        return self._service.execute(ledger.abandon, command)

    def effect(self, effect_key: str) -> EffectInfo:
        """An effect's status and full attempt history."""
        return self._service.run(ledger.effect_info(effect_key))

    def find_effect(self, effect_key: str) -> EffectInfo | None:
        """Like :meth:`effect`, but ``None`` for a key the ledger never saw."""
        try:
            return self.effect(effect_key)
        except NotFoundError:
            return None

    def override(
        self,
        effect_key: str,
        outcome: str,
        *,
        actor: str,
        reason: str,
        evidence: dict[str, Any] | None = None,
        result: Any = None,
    ) -> EffectInfo:
        """Operator override: settle a workflow's effect in doubt or needing review.

        ``result`` is exactly what the workflow's ``ctx.effect`` returns once the run goes
        on (any JSON value); ``evidence`` (a JSON object) and ``reason`` are kept with the
        settlement. Effects driven through the ledger verbs directly use ``reconcile``.
        """
        command = Override(
            effect_key=effect_key,
            outcome=outcome,
            actor=actor,
            reason=reason,
            evidence=evidence,
            result=result,
        )
        return self._service.execute(ledger.override, command)
