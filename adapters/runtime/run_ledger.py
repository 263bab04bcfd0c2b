"""The ledger as one run's workflow code uses it: guarded effects and a failing step's retries.

What an effect and a retried step promise is docs/api.md's. A step with a ``retry`` policy
counts its attempts in a ledger entry of its own, ``<step key>:attempts`` (``:round<n>``
after the n-th ``store.retry_run``), made when its first attempt fails: a healthy step never
touches the ledger. Every ledger write notes itself on the run's channel, so each is
followed by ``ChannelHead.refresh``; writes after ``fn`` ran go through ``durably``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from datetime import datetime
from typing import Any, NoReturn, Protocol, TypeVar, cast

from actae.adapters.persistence.awaiting import in_portal, run_in_portal
from actae.adapters.persistence.outages import is_transient
from actae.adapters.runtime.channel_head import ChannelHead
from actae.adapters.runtime.deadlines import DeadlineReachedError, attempt_deadline
from actae.adapters.runtime.service import ActaeService
from actae.adapters.telemetry.runs import EffectCall
from actae.domain import ledger, lifecycle
from actae.domain.effects import (
    Claim,
    EffectInfo,
    EffectStatus,
    RetryPolicy,
    retry_after_of,
    step_attempts_key,
    workflow_result,
    workflow_value,
)
from actae.domain.errors import (
    DeadlinePassedError,
    EffectBlockedError,
    FencingError,
    RetryNotDueError,
    RunStoppedError,
    ValidationError,
)
from actae.domain.redaction import Redactor
from actae.domain.validation import MAX_REASON_LENGTH
from actae.domain.values import RunInfo, RunStatus

T = TypeVar("T")
Reconcile = Callable[[str], Any]
"""Asks the provider whether the effect with this idempotency key happened: its result, or None."""
STEP_LEASE = 60.0
"""Seconds a step's attempt holds its claim between heartbeats' renewals."""
GIVEN_UP = frozenset({EffectStatus.NEEDS_REVIEW, EffectStatus.ABANDONED})
"""Attempts of a step that the policy ran out of (only an exhausted failure leaves these)."""
SETTLED = frozenset({EffectStatus.COMPLETED, EffectStatus.ABANDONED})


class Durably(Protocol):
    """Runs a write that must not be lost, through a database outage."""

    def __call__(self, write: Callable[[], T], /) -> T:
        """``write()``'s result once it went through."""
        ...


@dataclass(eq=False, repr=False)  # compared by identity; its repr never prints the run's contents
class RunLedger:
    """The ledger writes of one run's context, in its worker's name."""

    service: ActaeService
    run: RunInfo
    head: ChannelHead
    _: KW_ONLY
    worker: str
    redact: Redactor | None
    durably: Durably

    def effect(
        self,
        call: EffectCall,
        name: str,
        key: str,
        fn: Callable[[str, int], T],
        *,
        idempotent: bool,
        reconcile: Reconcile | None,
        lease: float,
        retry: RetryPolicy | None,
        request: dict[str, Any] | None,
        timeout: float | None,
    ) -> T:
        """``RunContext.effect`` past its boundary and its fork's prefix, in its span ``call``."""
        claim = self.service.call(
            ledger.claim,
            key,
            run_id=self.run.run_id,
            worker=self.worker,
            lease=lease,
            request=request or {"name": name},
            retry=retry,
            timeout=timeout,
        )
        call.claimed(claim)
        if claim.status == "completed":
            call.replayed_outcome()
            return cast(T, workflow_value(claim.result))
        self.head.refresh()
        try:  # the ledger notes each settlement on the channel: where, the span says
            if claim.in_doubt:
                call.in_doubt()
                settled = self._settle_doubt(key, claim, idempotent, reconcile)
                if settled is not None:
                    call.noted(self.head.receipt)
                    return cast(T, workflow_value(settled))
            call.attempting()
            done = self._attempt(key, claim, fn, lease)
        except (EffectBlockedError, RetryNotDueError, DeadlinePassedError):
            call.noted(self.head.receipt)  # noted as failed, for review, or in doubt
            raise
        call.ran(self.head.receipt)
        return done

    def _settle_doubt(
        self, key: str, claim: Claim, idempotent: bool, reconcile: Reconcile | None
    ) -> dict[str, Any] | None:
        """Resolve an in-doubt claim; returns the result if the effect turned out done."""
        if reconcile is not None:
            found = reconcile(key)
            info = self.service.call(
                ledger.reconcile,
                key,
                "failed" if found is None else "completed",
                actor=self.worker,
                token=claim.token,
                evidence={"source": "reconcile callback", "found": found is not None},
                result=None if found is None else workflow_result(found),
            )
            self.head.refresh()
            return info.result
        if idempotent:
            return None
        self.service.call(
            ledger.fail_effect,
            key,
            token=claim.token,
            worker=self.worker,
            final=True,
            error="in doubt: an earlier attempt may have happened; no reconcile",
        )
        self.head.refresh()
        raise EffectBlockedError(
            key,
            status=EffectStatus.NEEDS_REVIEW.value,
            detail="an earlier attempt may have happened",
        )

    def _attempt(self, key: str, claim: Claim, fn: Callable[[str, int], T], lease: float) -> T:
        """Call ``fn`` while heartbeating; record completion, failure, or a late answer's doubt."""
        try:
            with attempt_deadline(claim.deadline):
                value = self._with_heartbeats(key, claim.token, lease, lambda: fn(key, claim.token))
        except DeadlineReachedError:
            raise self._in_doubt(key, claim.token, "cancelled at its deadline") from None
        except Exception as error:
            info = self._failed(key, claim.token, error)
            if info.retry_at is None:
                raise EffectBlockedError(
                    key, status=info.status.value, detail=info.last_error or "retries exhausted"
                ) from error
            raise self._not_due(key, info.retry_at) from error
        self._complete(key, claim.token, value)
        return value

    def _not_due(self, key: str, retry_at: datetime) -> RetryNotDueError:
        wait = (retry_at - self.service.now()).total_seconds()
        return RetryNotDueError(key, retry_at=retry_at, wait=wait)

    def _failed(self, key: str, token: int, error: Exception) -> EffectInfo:
        """Record ``fn``'s failure; one raised at or after the deadline is in doubt instead.

        A provider client that timed out at the deadline cannot say whether the call landed,
        so the ledger refuses to schedule a retry of it (``DeadlinePassedError``).
        """
        message = f"{type(error).__name__}: {error}"
        try:
            info = self.durably(
                lambda: self.service.call(
                    ledger.fail_effect,
                    key,
                    token=token,
                    worker=self.worker,
                    error=message,
                    retry_after=retry_after_of(error),
                )
            )
        except DeadlinePassedError:
            raise self._in_doubt(key, token, "it failed at or after its deadline") from error
        self.head.refresh()
        return info

    def _in_doubt(self, key: str, token: int, why: str) -> DeadlinePassedError:
        """Record the attempt of ``token`` as in doubt (answered late); the error to raise."""
        reason = f"in doubt: {why}; it may or may not have happened"
        info = self.durably(
            lambda: self.service.call(
                ledger.doubt_effect, key, token=token, worker=self.worker, reason=reason
            )
        )
        self.head.refresh()
        deadline = info.deadline or self.service.now()
        return DeadlinePassedError(key, token=token, deadline=deadline, now=self.service.now())

    def _complete(self, key: str, token: int, value: Any) -> None:
        """Record the effect's outcome; a result that cannot be recorded stops everything.

        The effect happened, so it must never run again on its own: the attempt is failed
        for review (an operator's ``store.override`` gives the result the workflow will see)
        and the run fails with a ``ValidationError`` naming the effect. An answer after the
        attempt's deadline is refused by the ledger and recorded as in doubt instead.
        """
        try:
            self.complete(key, token, value)
        except DeadlinePassedError:
            raise self._in_doubt(key, token, "it answered after its deadline") from None
        except ValidationError as error:
            reason = f"it ran, but its result cannot be recorded: {error.reason}"
            self.service.call(
                ledger.fail_effect,
                key,
                token=token,
                worker=self.worker,
                error=f"{reason}; settle it with store.override(key, 'completed', result=...)",
                final=True,
            )
            self.service.call(
                lifecycle.fail_run, self.run.run_id, f"effect {key!r}: {reason}", actor=self.worker
            )
            self.head.refresh()
            raise ValidationError(f"effect {key!r}", reason) from error

    def complete(self, key: str, token: int, value: Any) -> None:
        """Record ``value`` as the result of the attempt of ``token`` (redacted, durably)."""
        self.durably(
            lambda: self.service.call(
                ledger.complete_effect,
                key,
                token=token,
                worker=self.worker,
                result=workflow_result(value),
                redact=self.redact,
            )
        )
        self.head.refresh()

    def _with_heartbeats(self, key: str, token: int, lease: float, call: Callable[[], T]) -> T:
        """``call()`` while the claim is renewed every third of ``lease``.

        In a thread the renewals run in a heartbeat thread; in an async run context (a
        greenback portal) they run as a task on the loop, so a cancelled workflow task
        stops them with it and leaves the claim to run out: in doubt, as after a kill.
        """

        def beat() -> bool:
            """One renewal; whether to keep renewing."""
            try:
                self.service.call(
                    ledger.heartbeat, key, token=token, worker=self.worker, lease=lease
                )
            except FencingError:
                return False  # someone else holds it now; our complete() will be refused
            except Exception as error:  # the next beat tries again, for as long as it can
                return is_transient(error)
            return True

        if in_portal():
            beating = asyncio.get_running_loop().create_task(_beat_as_task(beat, lease / 3))
            try:
                return call()
            finally:
                beating.cancel()
        done = threading.Event()

        def beat_until_done() -> None:
            while not done.wait(lease / 3) and beat():
                pass

        beater = threading.Thread(target=beat_until_done, name=f"heartbeat {key}", daemon=True)
        beater.start()
        try:
            return call()
        finally:
            done.set()
            beater.join()

    # -- a failing step's retries -------------------------------------------------------------

    def attempts_key(self, key: str) -> str:
        """The ledger entry that counts the attempts of the step named ``key``, this round."""
        return step_attempts_key(key, self.run.retries)

    def step(
        self, key: str, name: str, fn: Callable[[], T], policy: RetryPolicy
    ) -> tuple[T, Claim | None]:
        """Call ``fn`` when its attempt is due; the claim to complete once it is recorded.

        Raises ``RetryNotDueError`` after a failed attempt that the policy retries, and
        ``RunStoppedError`` once the policy is exhausted (the run is failed with the reason).
        """
        attempts = self.attempts_key(key)
        info = self.service.call(ledger.find_effect, attempts)
        claim = None
        if info is not None:
            if info.status is EffectStatus.COMPLETED:  # in the ledger, not yet on the channel
                return workflow_value(info.result), None
            if info.status in GIVEN_UP:  # its worker died between giving up and failing the run
                self._give_up(attempts, name, info)
            claim = self._claim_attempt(attempts, name, policy)
            self.head.refresh()
        try:
            if claim is None:
                return fn(), None
            return self._with_heartbeats(attempts, claim.token, STEP_LEASE, fn), claim
        except Exception as error:
            if claim is None:  # the first attempt failed: from now on the ledger counts
                claim = self._claim_attempt(attempts, name, policy)
            self._schedule_next(attempts, name, claim.token, error)

    def close_earlier_rounds(self, key: str) -> None:
        """Give up the attempts a step left open before ``store.retry_run`` (a new round).

        A run failed while one of its steps was retrying would otherwise show ``retrying``
        forever, for an attempt that nobody will make.
        """
        run = self.run
        for earlier in range(run.retries):
            attempts = step_attempts_key(key, earlier)
            info = self.service.call(ledger.find_effect, attempts)
            if info is not None and info.status not in SETTLED:
                reason = f"superseded: the run was retried (round {run.retries})"
                self.service.call(ledger.abandon, attempts, actor=self.worker, reason=reason)
                self.head.refresh()

    def _claim_attempt(self, attempts: str, name: str, policy: RetryPolicy) -> Claim:
        return self.service.call(
            ledger.claim,
            attempts,
            run_id=self.run.run_id,
            worker=self.worker,
            lease=STEP_LEASE,
            request={"step": name},
            retry=policy,
        )

    def _schedule_next(self, attempts: str, name: str, token: int, error: Exception) -> NoReturn:
        info = self.service.call(
            ledger.fail_effect,
            attempts,
            token=token,
            worker=self.worker,
            error=f"{type(error).__name__}: {error}",
            retry_after=retry_after_of(error),
        )
        self.head.refresh()
        if info.retry_at is not None:
            raise self._not_due(attempts, info.retry_at) from error
        self._give_up(attempts, name, info)

    def _give_up(self, attempts: str, name: str, info: EffectInfo) -> NoReturn:
        """The policy is exhausted: close the attempts and fail the run with the reason."""
        gave_up = f"step {name!r} failed after {info.attempt} attempts"
        reason = f"{gave_up}: {info.last_error}"
        if info.status is not EffectStatus.ABANDONED:
            # An abandonment's reason is metadata, in clear: the error (contents) stays in
            # the sealed failure events and the run's error.
            self.service.call(
                ledger.abandon, attempts, actor=self.worker, reason=gave_up[:MAX_REASON_LENGTH]
            )
        run_id = self.run.run_id
        self.service.call(lifecycle.fail_run, run_id, reason, actor=self.worker)
        self.head.refresh()
        raise RunStoppedError(run_id, status=RunStatus.FAILED.value)


async def _beat_as_task(beat: Callable[[], bool], every: float) -> None:
    """Renew every ``every`` seconds until cancelled, or until ``beat`` says stop."""
    while True:
        await asyncio.sleep(every)
        if not await run_in_portal(beat):
            return
