"""The tool-execution ledger's commands: claim, heartbeat, complete, doubt, fail, reconcile.

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
from datetime import datetime
from typing import Any
from uuid import UUID

from actae.domain.aggregate import Aggregate
from actae.domain.appending import reread_head
from actae.domain.channel import Channel
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
from actae.domain.custody import FORGOTTEN
from actae.domain.effects import (
    Claim,
    EffectInfo,
    EffectStatus,
    RetryPolicy,
    counts_step_attempts,
    workflow_result,
)
from actae.domain.errors import (
    ActaeError,
    ForgottenError,
    NotFoundError,
    OperationConflictError,
    ValidationError,
)
from actae.domain.operation import OVERRIDE_REASON, Operation
from actae.domain.pipeline import Core, retried
from actae.domain.plan import Plan, ask, now, save
from actae.domain.reader import StoreReader
from actae.domain.validation import (
    MAX_REASON_LENGTH,
    fingerprint,
    require_int,
    require_number,
    require_retry_after,
    require_text,
    require_uuid,
)

MAX_LEASE_SECONDS = 7 * 24 * 3600.0
OUTCOMES = ("completed", "failed")
"""What a reconciliation may find: the effect happened, or it did not."""

Note = tuple[str, dict[str, Any], bool]
"""The outcome noted on the run's channel: its kind, payload, and whether it settles."""
Move = Callable[[Operation, datetime], None]
"""The effect's decision (it raises the ledger's errors when it may not move)."""
Recorded = Callable[[Operation, datetime], EffectInfo | None]
"""What a stored effect already answers for this call (a lost reply's repeat), or ``None``."""


def claim_effect(command: ClaimEffect, core: Core) -> Plan[Claim]:
    """Claim the effect under a lease, or learn that it already completed.

    A first claim reads nothing: it registers the effect optimistically, the store refuses
    the write if the key exists, and the next attempt loads it.
    """
    key = require_text("effect_key", command.effect_key)
    run = require_uuid("run_id", command.run_id)
    worker = require_text("worker", command.worker)
    lease = _lease(command.lease)
    timeout = _timeout(key, lease, command.timeout)
    body = core.document("request", {} if command.request is None else command.request)
    policy = _policy(command.retry)
    # The policy is not part of the effect's identity: the first claim's policy applies.
    content = fingerprint("effect", str(run), body.checksum)

    def attempt(number: int) -> Plan[Claim]:
        at = yield from now()
        effect = yield from _load_or_register(core, key, run, body.value, content, policy, number)
        if not effect.claim(worker=worker, lease=lease, timeout=timeout, now=at):
            return _claim_of(effect, status="completed")
        payload = {
            "effect_key": key,
            "token": effect.token,
            "worker": worker,
            "in_doubt": effect.in_doubt,
            "deadline": effect.deadline.isoformat() if effect.deadline else None,
        }
        yield from _commit(core, effect, ("effect.claimed", payload, False))
        return _claim_of(effect, status="granted")

    return (yield from retried(attempt, lambda: f"effect {key!r}"))


def heartbeat(command: Heartbeat, core: Core) -> Plan[EffectInfo]:
    """Extend the holder's lease (``FencingError``: stale token; ``NotHolderError``)."""
    token = _token(command.token)
    worker = require_text("worker", command.worker)
    lease = _lease(command.lease)

    def move(effect: Operation, at: datetime) -> None:
        effect.heartbeat(token=token, worker=worker, lease=lease, now=at)

    return (yield from _decide(core, command.effect_key, None, move))


def complete_effect(command: CompleteEffect, core: Core) -> Plan[EffectInfo]:
    """Record that the effect happened, with its result (only its holder may).

    A repeat by the holder with the same result answers what is recorded: the first
    call's reply may have been lost after its commit.
    """
    token = _token(command.token)
    worker = require_text("worker", command.worker)
    document, redacted = core.redacted("result", command.result, command.redact)
    value = document.value
    key = require_text("effect_key", command.effect_key)

    def recorded(effect: Operation, at: datetime) -> EffectInfo | None:
        """A repeat of this very completion: what is recorded (its first reply was lost)."""
        if effect.result is None or effect.token != token:
            return None
        effect.ensure_holder(token, worker)
        if effect.result != value:
            raise OperationConflictError(
                key, recorded_fingerprint=str(effect.result), presented_fingerprint=str(value)
            )
        return effect.info(at)

    def move(effect: Operation, at: datetime) -> None:
        effect.complete(token=token, worker=worker, result=value, now=at, redacted=redacted)

    note = ("effect.completed", {"token": token, "result": value}, True)
    return (yield from _decide(core, key, note, move, recorded=recorded))


def doubt_effect(command: DoubtEffect, core: Core) -> Plan[EffectInfo]:
    """The holder records that its attempt is in doubt: it may or may not have happened.

    Its answer came after the attempt's deadline, or its call was cancelled at it. The
    lease ends at once; the next claim (once the deadline has passed) settles the doubt.
    """
    token = _token(command.token)
    worker = require_text("worker", command.worker)
    reason = require_text("reason", command.reason, max_length=MAX_REASON_LENGTH)

    def recorded(effect: Operation, at: datetime) -> EffectInfo | None:
        """A repeat of this very doubt: what is recorded (its first reply was lost)."""
        last = effect.attempts[-1] if effect.attempts else None
        if last is None or last.token != token or last.outcome != "in_doubt":
            return None
        if effect.status(at) is not EffectStatus.IN_DOUBT:  # moved on since: not a repeat
            return None
        effect.ensure_holder(token, worker)
        return effect.info(at)

    def move(effect: Operation, at: datetime) -> None:
        effect.doubt(token=token, worker=worker, reason=reason, now=at)

    note = ("effect.in_doubt", {"token": token, "reason": reason}, False)
    return (yield from _decide(core, command.effect_key, note, move, recorded=recorded))


def fail_effect(command: FailEffect, core: Core) -> Plan[EffectInfo]:
    """Record a failed attempt; the next one is scheduled by policy, or review is needed.

    ``retry_after`` is seconds, or an HTTP ``Retry-After`` value as the header gave it.
    Only the holder of the claim may.
    """
    token = _token(command.token)
    worker = require_text("worker", command.worker)
    error = require_text("error", command.error, max_length=1_000_000)[:MAX_REASON_LENGTH]
    delay = None
    if command.retry_after is not None:
        at = yield from now()
        delay = require_retry_after(
            "retry_after", command.retry_after, now=at, maximum=MAX_LEASE_SECONDS
        )
    draw = core.draw()
    final = command.final

    def move(effect: Operation, at: datetime) -> None:
        effect.fail(
            token=token,
            worker=worker,
            error=error,
            retry_after=delay,
            final=final,
            draw=draw,
            now=at,
        )

    note = ("effect.failed", {"token": token, "error": error}, False)
    return (yield from _decide(core, command.effect_key, note, move))


def reconcile(command: Reconcile, core: Core) -> Plan[EffectInfo]:
    """Settle an effect in doubt (or needing review) from what the provider reports."""
    outcome = command.outcome
    if outcome not in OUTCOMES:
        raise ValidationError("outcome", f"expected one of {OUTCOMES}, got {outcome!r}")
    actor = require_text("actor", command.actor)
    proof = core.document("evidence", command.evidence or {}).value
    value = None
    if outcome == "completed":  # an effect's result: redacted as a completion's is
        value = core.redacted("result", command.result or {}, None)[0].value
    held = None if command.token is None else _token(command.token)

    def move(effect: Operation, at: datetime) -> None:
        effect.reconcile(
            outcome=outcome, actor=actor, evidence=proof, result=value, token=held, now=at
        )

    payload = {"outcome": outcome, "actor": actor, "evidence": proof, "result": value}
    note = ("effect.reconciled", payload, outcome == "completed")
    return (yield from _decide(core, command.effect_key, note, move))


def override(command: Override, core: Core) -> Plan[EffectInfo]:
    """An operator settles a workflow's effect; ``result`` is what ``ctx.effect`` returns.

    The evidence is checked before the reason is added to it, so a bad one is a
    ``ValidationError`` and nothing is written.
    """
    reason = require_text("reason", command.reason, max_length=MAX_REASON_LENGTH)
    evidence = {} if command.evidence is None else command.evidence
    proof = core.document("evidence", evidence).value
    settled = Reconcile(
        effect_key=command.effect_key,
        outcome=command.outcome,
        actor=command.actor,
        evidence={**proof, OVERRIDE_REASON: reason},
        result=workflow_result(command.result) if command.outcome == "completed" else None,
    )
    return (yield from reconcile(settled, core))


def abandon(command: Abandon, core: Core) -> Plan[EffectInfo]:
    """Give up on an effect for good; it leaves the run's outstanding effects."""
    actor = require_text("actor", command.actor)
    reason = require_text("reason", command.reason, max_length=MAX_REASON_LENGTH)

    def move(effect: Operation, at: datetime) -> None:
        effect.abandon(actor=actor, reason=reason, now=at)

    note = ("effect.abandoned", {"actor": actor, "reason": reason}, True)
    return (yield from _decide(core, command.effect_key, note, move))


def effect_info(effect_key: str) -> Plan[EffectInfo]:
    """Everything the ledger knows about an effect, including its attempt history."""
    effect = yield from _effect(require_text("effect_key", effect_key))
    if effect.contents_withheld == FORGOTTEN:
        raise ForgottenError(effect.run_id)
    at = yield from now()
    return effect.info(at)


# -- internals ----------------------------------------------------------------------------


def _decide(
    core: Core,
    effect_key: str,
    note: Note | None,
    move: Move,
    *,
    recorded: Recorded | None = None,
) -> Plan[EffectInfo]:
    """Load, decide, save; re-decided from fresh state if the save lost a race.

    The first attempt starts from what this process remembers of an effect it holds
    (:mod:`actae.domain.known_effects`), if it does: a memory another process made stale
    makes the save lose a race, and a refusal decided on it is decided again on the stored
    effect. ``recorded`` answers a repeat of a call whose outcome is already stored (the
    first reply was lost); only a stored effect can show one.
    """
    key = require_text("effect_key", effect_key)
    effect_id = Operation.id_for(key)

    def attempt(number: int) -> Plan[EffectInfo]:
        at = yield from now()
        remembered = core.effects.effect(effect_id, at) if number == 0 else None
        if remembered is not None:
            try:
                move(remembered, at)
            except ActaeError:
                core.effects.forget(effect_id)
            else:
                return (yield from _saved(core, key, remembered, note, at))
        effect = yield from _effect(key)
        answer = None if recorded is None else recorded(effect, at)
        if answer is not None:
            return answer
        move(effect, at)
        return (yield from _saved(core, key, effect, note, at))

    return (yield from retried(attempt, lambda: f"effect {key!r}"))


def _saved(
    core: Core, key: str, effect: Operation, note: Note | None, at: datetime
) -> Plan[EffectInfo]:
    """Save the effect's new events (with the outcome noted on its run's channel); its info."""
    if note is None:
        yield from save(effect)
    else:
        kind, payload, settled = note
        yield from _commit(core, effect, (kind, {"effect_key": key, **payload}, settled))
    return effect.info(at)


def _commit(core: Core, effect: Operation, note: Note) -> Plan[None]:
    """Save the effect's new events with the outcome noted on the run's main channel.

    Both go in one transaction, so the channel log shows every side effect and its head
    knows which effects are still open.
    """
    kind, payload, settled = note
    head = core.heads.get(effect.channel_id) or (yield from reread_head(core, effect.channel_id))
    channel = Channel.from_head(head)
    event = effect.pending_events[-1]
    channel.note_effect(
        kind=kind,
        payload=payload,
        effect_key=effect.operation_id,
        settled=settled,
        at=event.timestamp,
    )
    pending: list[Aggregate] = [effect, channel]
    yield from save(*pending)


def _effect(key: str) -> Plan[Operation]:
    effect = yield from ask(StoreReader.operation, key)
    if effect is None or not effect.is_effect:
        raise NotFoundError("effect", key)
    return effect


def _load_or_register(
    core: Core,
    key: str,
    run_id: UUID,
    request: dict[str, Any],
    content: str,
    policy: RetryPolicy,
    number: int,
) -> Plan[Operation]:
    """The effect as stored, or a new registration.

    The first attempt skips the lookup: a key that exists makes the save fail, and the
    next attempt looks it up.
    """
    effect = None if number == 0 else (yield from ask(StoreReader.operation, key))
    if effect is None:
        channel_id = core.heads.main_channel(run_id)
        if channel_id is None:
            channel_id = (yield from ask(StoreReader.run_aggregate, run_id)).channel_id
        at = yield from now()
        return Operation.register(
            effect_key=key,
            run_id=run_id,
            channel_id=channel_id,
            request=request,
            fingerprint=content,
            policy=policy,
            at=at,
        )
    effect.ensure_same(content)
    return effect


def _policy(retry: RetryPolicy | Mapping[str, Any] | None) -> RetryPolicy:
    if retry is None or isinstance(retry, RetryPolicy):
        return retry or RetryPolicy()
    try:
        return RetryPolicy(**retry)
    except (TypeError, ValueError) as error:
        raise ValidationError("retry", str(error).splitlines()[0]) from None


def _lease(lease: float) -> float:
    return _seconds("lease", lease)


def _timeout(key: str, lease: float, timeout: float | None) -> float | None:
    """Seconds the attempt may take: ``timeout``, or the lease; none for a step's counter."""
    seconds = lease if timeout is None else _seconds("timeout", timeout)
    return None if counts_step_attempts(key) else seconds


def _seconds(field: str, value: float) -> float:
    """A lease or a timeout: a positive number of seconds, at most a week."""
    return require_number(field, value, minimum=0.001, maximum=MAX_LEASE_SECONDS)


def _token(token: int) -> int:
    return require_int("token", token, minimum=1)


def _claim_of(effect: Operation, *, status: str) -> Claim:
    return Claim(
        effect_key=effect.operation_id,
        status=status,
        token=effect.token,
        attempt=len(effect.attempts),
        in_doubt=effect.in_doubt,
        expires_at=effect.expires_at if status == "granted" else None,
        result=effect.result,
        deadline=effect.deadline if status == "granted" else None,
    )
