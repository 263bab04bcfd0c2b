"""The tool-execution ledger's commands: claim, heartbeat, complete, fail, reconcile, abandon.

Every verb loads the effect's Operation aggregate, lets it decide (it raises the contract's
errors: ``LeaseHeldError``, ``FencingError``, ``RetryNotDueError``, ``EffectBlockedError``)
and saves the decision. A first claim reads nothing: it registers the effect optimistically,
the store refuses the write if the key exists, and the next attempt loads it. Outcomes
(claimed, completed, failed, reconciled, abandoned) are also recorded on the run's main
channel *in the same transaction*, so the channel log shows every side effect and its head
knows which effects are still open. A save that loses a race is
re-decided from the fresh state, so exactly one of many simultaneous claims is granted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any
from uuid import UUID

from eventsourcing.persistence import IntegrityError

from actae.domain.channel import Channel
from actae.domain.effects import Claim, EffectInfo, RetryPolicy, workflow_result
from actae.domain.errors import (
    ContentionError,
    NotFoundError,
    OperationConflictError,
    ValidationError,
)
from actae.domain.heads import HeadCache
from actae.domain.operation import Operation
from actae.domain.ports import Clock, Codec
from actae.domain.reader import StoreReader
from actae.domain.validation import (
    MAX_REASON_LENGTH,
    fingerprint,
    require_document,
    require_int,
    require_number,
    require_retry_after,
    require_text,
    require_uuid,
)

RACE_ATTEMPTS = 50
MAX_LEASE_SECONDS = 7 * 24 * 3600.0
OUTCOMES = ("completed", "failed")


class Ledger:
    """Commands of the tool-execution ledger: leases, fencing tokens, retries, settlement."""

    def __init__(
        self,
        *,
        save: Callable[..., object],
        reader: StoreReader,
        heads: HeadCache,
        clock: Clock,
        codec: Codec,
        draw: Callable[[], float],
        max_document_bytes: int,
    ) -> None:
        self._save = save
        self._reader = reader
        self._heads = heads
        self._clock = clock
        self._codec = codec
        self._draw = draw
        self._max = max_document_bytes

    # -- verbs ----------------------------------------------------------------------------

    def claim(
        self,
        effect_key: str,
        *,
        run_id: UUID | str,
        worker: str,
        lease: float,
        request: dict[str, Any] | None = None,
        retry: RetryPolicy | Mapping[str, Any] | None = None,
    ) -> Claim:
        """Claim the effect under a lease, or learn that it already completed."""
        key = require_text("effect_key", effect_key)
        run = require_uuid("run_id", run_id)
        worker = require_text("worker", worker)
        lease = require_number("lease", lease, minimum=0.001, maximum=MAX_LEASE_SECONDS)
        body = require_document(
            "request", {} if request is None else request, self._codec, max_bytes=self._max
        )
        policy = self._policy(retry)
        # The policy is not part of the effect's identity: the first claim's policy applies.
        content = fingerprint("effect", str(run), body.checksum)
        for attempt in range(RACE_ATTEMPTS):
            now = self._clock()
            effect = self._load_or_register(
                key, run, body.value, content, policy, assume_new=attempt == 0
            )
            if not effect.claim(worker=worker, lease=lease, now=now):
                return _claim_of(effect, status="completed")
            payload = {
                "effect_key": key,
                "token": effect.token,
                "worker": worker,
                "in_doubt": effect.in_doubt,
            }
            if self._commit(effect, "effect.claimed", payload, settled=False):
                return _claim_of(effect, status="granted")
        raise self._still_racing(key)

    def heartbeat(self, effect_key: str, *, token: int, worker: str, lease: float) -> EffectInfo:
        """Extend the holder's lease (``FencingError``: stale token; ``NotHolderError``)."""
        token = self._token(token)
        worker = require_text("worker", worker)
        lease = require_number("lease", lease, minimum=0.001, maximum=MAX_LEASE_SECONDS)
        return self._decide(
            effect_key,
            None,
            lambda e, now: e.heartbeat(token=token, worker=worker, lease=lease, now=now),
        )

    def complete(
        self, effect_key: str, *, token: int, worker: str, result: dict[str, Any]
    ) -> EffectInfo:
        """Record that the effect happened, with its result (only its holder may)."""
        token = self._token(token)
        worker = require_text("worker", worker)
        value = require_document("result", result, self._codec, max_bytes=self._max).value
        key = require_text("effect_key", effect_key)
        effect = self._effect(key)
        if effect.result is not None and effect.token == token:
            effect.ensure_holder(token, worker)
            if effect.result != value:
                raise OperationConflictError(
                    key, recorded_fingerprint=str(effect.result), presented_fingerprint=str(value)
                )
            return effect.info(self._clock())
        return self._decide(
            key,
            ("effect.completed", {"token": token, "result": value}, True),
            lambda e, now: e.complete(token=token, worker=worker, result=value, now=now),
            loaded=effect,
        )

    def fail(
        self,
        effect_key: str,
        *,
        token: int,
        worker: str,
        error: str,
        retry_after: float | str | None = None,
        final: bool = False,
    ) -> EffectInfo:
        """Record a failed attempt; the next one is scheduled by policy, or review is needed.

        ``retry_after`` is seconds, or an HTTP ``Retry-After`` value as the header gave it.
        Only the holder of the claim may.
        """
        token = self._token(token)
        worker = require_text("worker", worker)
        error = require_text("error", error, max_length=1_000_000)[:MAX_REASON_LENGTH]
        delay = None
        if retry_after is not None:
            delay = require_retry_after(
                "retry_after", retry_after, now=self._clock(), maximum=MAX_LEASE_SECONDS
            )
        draw = self._draw()
        return self._decide(
            effect_key,
            ("effect.failed", {"token": token, "error": error}, False),
            lambda e, now: e.fail(
                token=token,
                worker=worker,
                error=error,
                retry_after=delay,
                final=final,
                draw=draw,
                now=now,
            ),
        )

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
        """Settle an effect in doubt (or needing review) from what the provider reports."""
        if outcome not in OUTCOMES:
            raise ValidationError("outcome", f"expected one of {OUTCOMES}, got {outcome!r}")
        actor = require_text("actor", actor)
        proof = require_document("evidence", evidence or {}, self._codec, max_bytes=self._max)
        value = None
        if outcome == "completed":
            value = require_document("result", result or {}, self._codec, max_bytes=self._max).value
        held = None if token is None else self._token(token)
        payload = {"outcome": outcome, "actor": actor, "evidence": proof.value, "result": value}
        return self._decide(
            effect_key,
            ("effect.reconciled", payload, outcome == "completed"),
            lambda e, now: e.reconcile(
                outcome=outcome,
                actor=actor,
                evidence=proof.value,
                result=value,
                token=held,
                now=now,
            ),
        )

    def override(
        self,
        effect_key: str,
        outcome: str,
        *,
        actor: str,
        reason: str,
        evidence: object = None,
        result: object = None,
    ) -> EffectInfo:
        """An operator settles a workflow's effect; ``result`` is what ``ctx.effect`` returns.

        The evidence is checked before the reason is added to it, so a bad one is a
        ``ValidationError`` and nothing is written.
        """
        reason = require_text("reason", reason, max_length=MAX_REASON_LENGTH)
        proof = require_document(
            "evidence", {} if evidence is None else evidence, self._codec, max_bytes=self._max
        ).value
        return self.reconcile(
            effect_key,
            outcome,
            actor=actor,
            evidence={**proof, "override_reason": reason},
            result=workflow_result(result) if outcome == "completed" else None,
        )

    def abandon(self, effect_key: str, *, actor: str, reason: str) -> EffectInfo:
        """Give up on an effect for good; it leaves the run's outstanding effects."""
        actor = require_text("actor", actor)
        reason = require_text("reason", reason, max_length=MAX_REASON_LENGTH)
        return self._decide(
            effect_key,
            ("effect.abandoned", {"actor": actor, "reason": reason}, True),
            lambda e, now: e.abandon(actor=actor, reason=reason, now=now),
        )

    def effect(self, effect_key: str) -> EffectInfo:
        """Everything the ledger knows about an effect, including its attempt history."""
        return self._effect(require_text("effect_key", effect_key)).info(self._clock())

    # -- internals ------------------------------------------------------------------------

    def _decide(
        self,
        effect_key: str,
        note: tuple[str, dict[str, Any], bool] | None,
        decide: Callable[[Operation, Any], None],
        loaded: Operation | None = None,
    ) -> EffectInfo:
        """Load, decide, save; re-decide from fresh state if the save lost a race.

        ``loaded`` is the effect as the caller just read it, used for the first attempt.
        """
        key = require_text("effect_key", effect_key)
        for _ in range(RACE_ATTEMPTS):
            effect, loaded = loaded or self._effect(key), None
            now = self._clock()
            decide(effect, now)
            kind, payload, settled = note or ("", {}, False)
            if self._commit(
                effect, kind, {"effect_key": key, **payload}, settled, on_channel=note is not None
            ):
                return effect.info(now)
        raise self._still_racing(key)

    def _commit(
        self,
        effect: Operation,
        kind: str,
        payload: dict[str, Any],
        settled: bool,
        *,
        on_channel: bool = True,
    ) -> bool:
        """Save the effect's new events (and the channel note); ``False`` if a race was lost."""
        pending: list[Any] = [effect]
        if on_channel:
            guess = self._heads.get(effect.channel_id)
            channel = Channel.from_head(guess or self._heads.reread(effect.channel_id))
            event = effect.pending_events[-1]
            channel.note_effect(
                kind=kind,
                payload=payload,
                effect_key=effect.operation_id,
                settled=settled,
                at=event.timestamp,
            )
            pending.append(channel)
        try:
            self._save(*pending)
        except IntegrityError:
            if on_channel:  # the channel may have moved: the next attempt needs its true head
                self._heads.reread(effect.channel_id)
            return False
        return True

    def _effect(self, key: str) -> Operation:
        effect = self._reader.operation(key)
        if effect is None or not effect.is_effect:
            raise NotFoundError("effect", key)
        return effect

    def _load_or_register(
        self,
        key: str,
        run_id: UUID,
        request: dict[str, Any],
        content: str,
        policy: RetryPolicy,
        *,
        assume_new: bool,
    ) -> Operation:
        """The effect as stored, or a new registration.

        ``assume_new`` skips the lookup: a key that exists makes the save fail, and the next
        attempt looks it up.
        """
        effect = None if assume_new else self._reader.operation(key)
        if effect is None:
            channel_id = self._heads.main_channel(run_id)
            if channel_id is None:
                channel_id = self._reader.run_aggregate(run_id).channel_id
            return Operation.register(
                effect_key=key,
                run_id=run_id,
                channel_id=channel_id,
                request=request,
                fingerprint=content,
                policy=policy,
                at=self._clock(),
            )
        effect.ensure_same(content)
        return effect

    def _policy(self, retry: RetryPolicy | Mapping[str, Any] | None) -> RetryPolicy:
        if retry is None or isinstance(retry, RetryPolicy):
            return retry or RetryPolicy()
        try:
            return RetryPolicy(**retry)
        except (TypeError, ValueError) as error:
            raise ValidationError("retry", str(error).splitlines()[0]) from None

    @staticmethod
    def _token(token: int) -> int:
        return require_int("token", token, minimum=1)

    @staticmethod
    def _still_racing(key: str) -> Exception:
        return ContentionError(f"effect {key!r}", RACE_ATTEMPTS)


def _claim_of(effect: Operation, *, status: str) -> Claim:
    return Claim(
        effect_key=effect.operation_id,
        status=status,
        token=effect.token,
        attempt=len(effect.attempts),
        in_doubt=effect.in_doubt,
        expires_at=effect.expires_at if status == "granted" else None,
        result=effect.result,
    )
