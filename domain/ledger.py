"""The tool-execution ledger's commands, each bound as the ``Store`` method of its name.

A verb loads the effect's Operation, lets it decide and saves the decision with a note on the
run's main channel in one transaction, so the channel's head knows the open effects. A first
claim registers optimistically (the store refuses an existing key) and, on a run this process
has not seen, guesses the run's opening head, which the write proves. A save that loses a race
is decided again, so exactly one of simultaneous claims is granted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any
from uuid import UUID

from actae.domain.channel import Channel, ChannelHead
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
from actae.domain.pipeline import Shell, retried
from actae.domain.redaction import Redactor
from actae.domain.run import Run
from actae.domain.validation import (
    MAX_REASON_LENGTH,
    fingerprint,
    require_int,
    require_json,
    require_number,
    require_retry_after,
    require_text,
    require_uuid,
)

MAX_LEASE_SECONDS = 7 * 24 * 3600.0
DEFAULT_POLICY = RetryPolicy()
"""The policy of an effect claimed without one (frozen: one value serves every claim)."""
OUTCOMES = ("completed", "failed")
"""What a reconciliation may find: the effect happened, or it did not."""

Note = tuple[str, dict[str, Any], bool]
"""The outcome noted on the run's channel: its kind, payload, and whether it settles."""
Move = Callable[[Operation, datetime], None]
"""The effect's decision (it raises the ledger's errors when it may not move)."""
Recorded = Callable[[Operation, datetime], EffectInfo | None]
"""What a stored effect already answers for this call (a lost reply's repeat), or ``None``."""


def claim(
    shell: Shell,
    effect_key: str,
    *,
    run_id: UUID | str,
    worker: str,
    lease: float,
    request: dict[str, Any] | None = None,
    retry: RetryPolicy | Mapping[str, Any] | None = None,
    timeout: float | None = None,
) -> Claim:
    """Claim a side effect under a lease of ``lease`` seconds (docs/api.md, the ledger).

    The attempt must be over ``timeout`` seconds after the claim (default: the lease): its
    ``deadline``, which heartbeats never move. A granted :class:`Claim` carries a fencing token;
    a completed effect answers its recorded result. The first claim's ``retry`` policy applies.
    """
    key = require_text("effect_key", effect_key)
    run = require_uuid("run_id", run_id)
    worker = require_text("worker", worker)
    lease = _seconds("lease", lease)
    timeout = _timeout(key, lease, timeout)
    core = shell.core
    limit = core.max_document_bytes
    body, canonical = require_json(
        "request", {} if request is None else request, core.codec, max_bytes=limit
    )
    policy = _policy(retry)
    # Not the policy: the first claim's applies. The run id has a fixed form, so the parts
    # read back one way.
    content = fingerprint("effect", str(run), canonical.decode())

    def attempt(number: int) -> Claim:
        at = shell.now()
        found = None if number == 0 else shell.reader.operation(key)
        if found is None:  # a new effect (the store refuses the write if the key exists)
            channel_id, head = _channel_of(shell, run, number, at)
            registered, claimed = Operation.first_claim(
                effect_key=key,
                worker=worker,
                lease=lease,
                timeout=timeout,
                at=at,
                run_id=run,
                channel_id=channel_id,
                request=body,
                fingerprint=content,
                policy=policy,
            )
            head = head or shell.core.heads.get(channel_id) or reread_head(shell, channel_id)
            shell.save(registered, claimed, effect_note(head, key, _claimed(key, claimed), at))
            return _granted(key, claimed, 1)
        found.ensure_same(content)
        again = found.claim(worker=worker, lease=lease, timeout=timeout, now=at)
        if again is None:  # completed: the recorded result
            return Claim(
                effect_key=key,
                status="completed",
                token=found.token,
                attempt=len(found.attempts),
                in_doubt=found.in_doubt,
                expires_at=None,
                result=found.result,
            )
        _commit(shell, found, _claimed(key, again))
        return _granted(key, again, len(found.attempts))

    return retried(shell, attempt, lambda: f"effect {key!r}")


def heartbeat(
    shell: Shell, effect_key: str, *, token: int, worker: str, lease: float
) -> EffectInfo:
    """Extend ``worker``'s lease on ``token`` (``FencingError``: stale, ``NotHolderError``)."""
    token = _token(token)
    worker = require_text("worker", worker)
    lease = _seconds("lease", lease)

    def move(effect: Operation, at: datetime) -> None:
        effect.heartbeat(token=token, worker=worker, lease=lease, now=at)

    return _decide(shell, effect_key, None, move)


def complete_effect(
    shell: Shell,
    effect_key: str,
    *,
    token: int,
    worker: str,
    result: dict[str, Any],
    redact: Redactor | None = None,
) -> EffectInfo:
    """Record that the effect happened; a stale ``token`` raises ``FencingError``.

    ``worker`` must be the claim's holder (``NotHolderError``): anyone who reads the effect sees
    its token. ``redact`` cleans ``result`` before the store's redactor does (docs/data.md). A
    repeat by the holder with the same result answers what is recorded (a lost reply).
    """
    token = _token(token)
    worker = require_text("worker", worker)
    document, redacted = shell.core.redacted("result", result, redact)
    value = document.value
    key = require_text("effect_key", effect_key)

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
    return _decide(shell, key, note, move, recorded=recorded)


def doubt_effect(
    shell: Shell, effect_key: str, *, token: int, worker: str, reason: str
) -> EffectInfo:
    """The holder cannot say whether its attempt happened (it answered late): in doubt now.

    The lease ends at once; after the deadline, the next claim is in doubt and settles it.
    """
    token = _token(token)
    worker = require_text("worker", worker)
    reason = require_text("reason", reason, max_length=MAX_REASON_LENGTH)

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
    return _decide(shell, effect_key, note, move, recorded=recorded)


def fail_effect(
    shell: Shell,
    effect_key: str,
    *,
    token: int,
    worker: str,
    error: str,
    retry_after: float | str | None = None,
    final: bool = False,
) -> EffectInfo:
    """Record a failed attempt; the retry policy (and ``retry_after``) schedules the next.

    ``retry_after``: seconds, or an HTTP ``Retry-After`` header's value (``"30"`` or a date).
    """
    token = _token(token)
    worker = require_text("worker", worker)
    error = require_text("error", error, max_length=1_000_000)[:MAX_REASON_LENGTH]
    delay = None
    if retry_after is not None:
        delay = require_retry_after(
            "retry_after", retry_after, now=shell.now(), maximum=MAX_LEASE_SECONDS
        )
    draw = shell.core.draw()

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
    return _decide(shell, effect_key, note, move)


def reconcile(
    shell: Shell,
    effect_key: str,
    outcome: str,
    *,
    actor: str,
    evidence: dict[str, Any] | None = None,
    result: dict[str, Any] | None = None,
    token: int | None = None,
) -> EffectInfo:
    """Settle an effect in doubt: ``"completed"`` (with ``result``) or ``"failed"``."""
    if outcome not in OUTCOMES:
        raise ValidationError("outcome", f"expected one of {OUTCOMES}, got {outcome!r}")
    actor = require_text("actor", actor)
    proof = shell.core.document("evidence", evidence or {}).value
    value = None
    if outcome == "completed":  # an effect's result: redacted as a completion's is
        value = shell.core.redacted("result", result or {}, None)[0].value
    held = None if token is None else _token(token)

    def move(effect: Operation, at: datetime) -> None:
        effect.reconcile(
            outcome=outcome, actor=actor, evidence=proof, result=value, token=held, now=at
        )

    payload = {"outcome": outcome, "actor": actor, "evidence": proof, "result": value}
    note = ("effect.reconciled", payload, outcome == "completed")
    return _decide(shell, effect_key, note, move)


def override(
    shell: Shell,
    effect_key: str,
    outcome: str,
    *,
    actor: str,
    reason: str,
    evidence: dict[str, Any] | None = None,
    result: Any = None,
) -> EffectInfo:
    """Operator override: settle a workflow's effect in doubt or needing review.

    ``result`` is what the workflow's ``ctx.effect`` returns once the run goes on (any JSON);
    ``evidence`` and ``reason`` are kept with it. The evidence is checked before the reason joins.
    """
    reason = require_text("reason", reason, max_length=MAX_REASON_LENGTH)
    evidence = {} if evidence is None else evidence
    proof = shell.core.document("evidence", evidence).value
    return reconcile(
        shell,
        effect_key,
        outcome,
        actor=actor,
        evidence={**proof, OVERRIDE_REASON: reason},
        result=workflow_result(result) if outcome == "completed" else None,
    )


def abandon(shell: Shell, effect_key: str, *, actor: str, reason: str) -> EffectInfo:
    """Give up on an effect for good; it leaves the run's outstanding effects."""
    actor = require_text("actor", actor)
    reason = require_text("reason", reason, max_length=MAX_REASON_LENGTH)

    def move(effect: Operation, at: datetime) -> None:
        effect.abandon(actor=actor, reason=reason, now=at)

    note = ("effect.abandoned", {"actor": actor, "reason": reason}, True)
    return _decide(shell, effect_key, note, move)


def effect(shell: Shell, effect_key: str) -> EffectInfo:
    """An effect's status and full attempt history."""
    found = _effect(shell, require_text("effect_key", effect_key))
    if found.contents_withheld == FORGOTTEN:
        raise ForgottenError(found.run_id)
    return found.info(shell.now())


def find_effect(shell: Shell, effect_key: str) -> EffectInfo | None:
    """Like :meth:`effect`, but ``None`` for a key the ledger never saw."""
    try:
        return effect(shell, effect_key)
    except NotFoundError:
        return None


# -- internals ----------------------------------------------------------------------------


def _decide(
    shell: Shell,
    effect_key: str,
    note: Note | None,
    move: Move,
    *,
    recorded: Recorded | None = None,
) -> EffectInfo:
    """Load, decide, save; decided again on the stored effect if the save lost a race.

    The first attempt starts from this process's memory (:mod:`.known_effects`), whose refusals
    are decided again too. ``recorded`` answers a repeat whose first reply was lost.
    """
    key = require_text("effect_key", effect_key)
    effect_id = Operation.id_for(key)
    known = shell.core.effects

    def attempt(number: int) -> EffectInfo:
        at = shell.now()
        remembered = known.effect(effect_id, at) if number == 0 else None
        if remembered is not None:
            try:
                move(remembered, at)
            except ActaeError:
                known.forget(effect_id)
            else:
                return _saved(shell, key, remembered, note, at)
        stored = _effect(shell, key)
        answer = None if recorded is None else recorded(stored, at)
        if answer is not None:
            return answer
        move(stored, at)
        return _saved(shell, key, stored, note, at)

    return retried(shell, attempt, lambda: f"effect {key!r}")


def _saved(
    shell: Shell, key: str, effect: Operation, note: Note | None, at: datetime
) -> EffectInfo:
    """Save the effect's new events (with the outcome noted on its run's channel); its info."""
    if note is None:
        shell.save(effect)
    else:
        kind, payload, settled = note
        _commit(shell, effect, (kind, {"effect_key": key, **payload}, settled))
    return effect.info(at)


def _commit(shell: Shell, effect: Operation, note: Note) -> None:
    """Save the effect's new events with the outcome noted on the run's main channel."""
    head = shell.core.heads.get(effect.channel_id) or reread_head(shell, effect.channel_id)
    at = effect.pending_events[-1].timestamp
    shell.save(effect, effect_note(head, effect.operation_id, note, at))


def _claimed(key: str, claimed: Operation.Claimed) -> Note:
    """The note of a granted claim on the run's channel (the effect stays open)."""
    deadline = claimed.deadline
    payload = {
        "effect_key": key,
        "token": claimed.token,
        "worker": claimed.worker,
        "in_doubt": claimed.in_doubt,
        "deadline": deadline.isoformat() if deadline else None,
    }
    return "effect.claimed", payload, False


def effect_note(head: ChannelHead, key: str, note: Note, at: datetime) -> Channel.Event:
    """The event after ``head`` noting effect ``key``'s ``note``, with the effects still open.

    Built on the head alone (values validated already); a settled effect leaves the open ones.
    """
    kind, payload, settled = note
    others = tuple(open_key for open_key in head.open_effects if open_key != key)
    return Channel.following(
        head,
        Channel.Recorded,
        at,
        kind=kind,
        payload=payload,
        operation_id=None,
        open_effects=others if settled else (*others, key),
        redacted={},  # given, as every field: no default looked up for a note
        fingerprint=None,
    )


def opening_head(run_id: UUID, at: datetime) -> ChannelHead:
    """The head of ``run_id``'s main channel while it holds only its opening event.

    A note after it is version 2, whose write proves the guess: the store refuses it if version
    1 is missing (no such run here) or 2 is taken (it moved on), and the claim is decided again.
    """
    return ChannelHead(Run.channel_for(run_id), 1, at, run_id, 1, 1, (), {})


def reread_head(shell: Shell, channel_id: UUID) -> ChannelHead:
    """The channel's head as stored (one read), remembered as this process's new guess."""
    event = shell.reader.head_event(channel_id)
    shell.core.heads.put(event)
    return ChannelHead.of(event)


def _effect(shell: Shell, key: str) -> Operation:
    found = shell.reader.operation(key)
    if found is None or not found.is_effect:
        raise NotFoundError("effect", key)
    return found


def _channel_of(
    shell: Shell, run_id: UUID, number: int, at: datetime
) -> tuple[UUID, ChannelHead | None]:
    """The run's main channel for a new effect, and the guessed head its note follows.

    A first attempt on a run not seen guesses :func:`opening_head`; later ones read the head.
    """
    channel_id = shell.core.heads.main_channel(run_id)
    if channel_id is not None:
        return channel_id, None
    if number == 0:
        guess = opening_head(run_id, at)
        return guess.originator_id, guess
    head = shell.reader.main_head(run_id)
    shell.core.heads.put(head)
    return head.originator_id, None


def _policy(retry: RetryPolicy | Mapping[str, Any] | None) -> RetryPolicy:
    if retry is None or isinstance(retry, RetryPolicy):
        return retry or DEFAULT_POLICY
    try:
        return RetryPolicy(**retry)
    except (TypeError, ValueError) as error:
        raise ValidationError("retry", str(error).splitlines()[0]) from None


def _timeout(key: str, lease: float, timeout: float | None) -> float | None:
    """Seconds the attempt may take: ``timeout``, or the lease; none for a step's counter."""
    seconds = lease if timeout is None else _seconds("timeout", timeout)
    return None if counts_step_attempts(key) else seconds


def _seconds(field: str, value: float) -> float:
    """A lease or a timeout: a positive number of seconds, at most a week."""
    return require_number(field, value, minimum=0.001, maximum=MAX_LEASE_SECONDS)


def _token(token: int) -> int:
    return require_int("token", token, minimum=1)


def _granted(key: str, claimed: Operation.Claimed, attempt: int) -> Claim:
    """The answer to a granted claim: its token, lease and deadline."""
    return Claim(
        effect_key=key,
        status="granted",
        token=claimed.token,
        attempt=attempt,
        in_doubt=claimed.in_doubt,
        expires_at=claimed.expires_at,
        result=None,
        deadline=claimed.deadline,
    )
