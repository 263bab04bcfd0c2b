"""Retries of a failing step (``ctx.step(..., retry=RetryPolicy(...))``), kept by the ledger.

A model call that answers HTTP 429 should be tried again later, not fail the run. The
attempts of a step are counted and scheduled by the same ledger entry an effect uses, under
the key ``<step key>:attempts`` (``:round<n>`` after the n-th ``store.retry_run``, so an
operator's retry starts a fresh budget): backoff with full jitter, ``retry_after`` honoured,
and the run shows as ``retrying`` until the next attempt is due. A healthy step never touches
the ledger: the entry is made when the first attempt fails.

A step is not a side effect: an attempt whose worker died is simply made again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn, TypeVar

from actae.domain.effects import (
    Claim,
    EffectInfo,
    EffectStatus,
    RetryPolicy,
    retry_after_of,
    step_attempts_key,
    workflow_value,
)
from actae.domain.errors import RetryNotDueError, RunStoppedError
from actae.domain.validation import MAX_REASON_LENGTH
from actae.domain.values import RunInfo, RunStatus

if TYPE_CHECKING:
    from actae.adapters.runtime.store import Store

T = TypeVar("T")
STEP_LEASE = 60.0
"""Seconds an attempt holds its claim between heartbeats' renewals."""
GIVEN_UP = frozenset({EffectStatus.NEEDS_REVIEW, EffectStatus.ABANDONED})
"""Attempts of a step that the policy ran out of (only an exhausted failure leaves these)."""
SETTLED = frozenset({EffectStatus.COMPLETED, EffectStatus.ABANDONED})


class StepRetries:
    """The retrying part of ``RunContext.step`` (mixed into it)."""

    if TYPE_CHECKING:  # provided by RunContext and EffectSteps
        store: Store
        run: RunInfo
        worker: str

        def _refresh(self) -> None: ...

        def _with_heartbeats(
            self, key: str, token: int, lease: float, call: Callable[[], T]
        ) -> T: ...

    def _attempts_key(self, key: str) -> str:
        return step_attempts_key(key, self.run.retries)

    def _call_with_retries(
        self, key: str, name: str, fn: Callable[[], T], policy: RetryPolicy
    ) -> tuple[T, Claim | None]:
        """Call ``fn`` when its attempt is due; the claim to complete once it is recorded.

        Raises ``RetryNotDueError`` after a failed attempt that the policy retries, and
        ``RunStoppedError`` once the policy is exhausted (the run is failed with the reason).
        """
        attempts = self._attempts_key(key)
        info = self.store.find_effect(attempts)
        claim = None
        if info is not None:
            if info.status is EffectStatus.COMPLETED:  # in the ledger, not yet on the channel
                return workflow_value(info.result), None
            if info.status in GIVEN_UP:  # its worker died between giving up and failing the run
                self._give_up(attempts, name, info)
            claim = self._claim_attempt(attempts, name, policy)
            self._refresh()
        try:
            if claim is None:
                return fn(), None
            token = claim.token
            return self._with_heartbeats(attempts, token, STEP_LEASE, fn), claim
        except Exception as error:
            if claim is None:  # the first attempt failed: from now on the ledger counts
                claim = self._claim_attempt(attempts, name, policy)
            self._schedule_next(attempts, name, claim.token, error)

    def _close_earlier_rounds(self, key: str) -> None:
        """Give up the attempts a step left open before ``store.retry_run`` (a new round).

        A run failed while one of its steps was retrying would otherwise show ``retrying``
        forever, for an attempt that nobody will make.
        """
        for earlier in range(self.run.retries):
            attempts = step_attempts_key(key, earlier)
            info = self.store.find_effect(attempts)
            if info is not None and info.status not in SETTLED:
                reason = f"superseded: the run was retried (round {self.run.retries})"
                self.store.abandon(attempts, actor=self.worker, reason=reason)
                self._refresh()

    def _claim_attempt(self, attempts: str, name: str, policy: RetryPolicy) -> Claim:
        return self.store.claim(
            attempts,
            run_id=self.run.run_id,
            worker=self.worker,
            lease=STEP_LEASE,
            request={"step": name},
            retry=policy,
        )

    def _schedule_next(self, attempts: str, name: str, token: int, error: Exception) -> NoReturn:
        info = self.store.fail_effect(
            attempts,
            token=token,
            worker=self.worker,
            error=f"{type(error).__name__}: {error}",
            retry_after=retry_after_of(error),
        )
        self._refresh()
        if info.retry_at is not None:
            wait = (info.retry_at - self.store.now()).total_seconds()
            raise RetryNotDueError(attempts, retry_at=info.retry_at, wait=wait) from error
        self._give_up(attempts, name, info)

    def _give_up(self, attempts: str, name: str, info: EffectInfo) -> NoReturn:
        """The policy is exhausted: close the attempts and fail the run with the reason."""
        gave_up = f"step {name!r} failed after {info.attempt} attempts"
        reason = f"{gave_up}: {info.last_error}"
        if info.status is not EffectStatus.ABANDONED:
            # An abandonment's reason is metadata, in clear: the error (contents) stays in
            # the sealed failure events and the run's error.
            self.store.abandon(attempts, actor=self.worker, reason=gave_up[:MAX_REASON_LENGTH])
        self.store.fail_run(self.run.run_id, reason, actor=self.worker)
        self._refresh()
        raise RunStoppedError(self.run.run_id, status=RunStatus.FAILED.value)
