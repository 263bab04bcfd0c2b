"""Side effects inside workflow code: ``RunContext.effect``, guarded by the ledger.

An effect is claimed under a lease before ``fn`` runs, heartbeated while it runs, and
recorded as completed or failed afterwards. An attempt that may have happened (its worker
died inside it) is in doubt: a ``reconcile`` callback decides, an idempotent effect is
retried under the same key, anything else stops for review.

Every attempt has a deadline (``timeout``, the lease by default), recorded with its claim
and readable inside ``fn`` as ``actae.current_deadline()``. Nobody takes the effect over
before it has passed; an answer that comes after it is recorded as in doubt, never as
completed (an async ``fn`` is cancelled at it; a plain one cannot be stopped).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from actae.adapters.persistence.awaiting import in_portal, run_in_portal
from actae.adapters.persistence.outages import is_transient
from actae.adapters.runtime.deadlines import DeadlineReachedError, attempt_deadline
from actae.domain.effects import (
    Claim,
    EffectInfo,
    EffectStatus,
    RetryPolicy,
    retry_after_of,
    workflow_result,
    workflow_value,
)
from actae.domain.errors import (
    DeadlinePassedError,
    EffectBlockedError,
    FencingError,
    RetryNotDueError,
    ValidationError,
)
from actae.domain.redaction import Redactor
from actae.domain.values import Receipt, RunInfo

if TYPE_CHECKING:
    from actae.adapters.runtime.store import Store
    from actae.adapters.telemetry.runs import RunTrace

T = TypeVar("T")
Reconcile = Callable[[str], Any]
"""Asks the provider whether the effect with this idempotency key happened: its result, or None."""


class EffectSteps:
    """The effect step of ``RunContext`` (mixed into it)."""

    if TYPE_CHECKING:  # provided by RunContext
        store: Store
        run: RunInfo
        worker: str
        trace: RunTrace
        redact: Redactor | None

        @property
        def head(self) -> Receipt:
            """The last channel event the context knows of."""
            ...

        def checkpoint(self) -> RunInfo:
            """The step boundary: raises unless the run may go on."""
            ...

        def _key(self, kind: str, name: str) -> str: ...

        def _refresh(self) -> None: ...

        def _inherited_effect(self, key: str) -> tuple[bool, Any]: ...

        def _durably(self, write: Callable[[], T]) -> T: ...

    def effect(
        self,
        name: str,
        fn: Callable[[str, int], T],
        *,
        idempotent: bool = False,
        reconcile: Reconcile | None = None,
        lease: float = 30.0,
        retry: RetryPolicy | None = None,
        request: dict[str, Any] | None = None,
        timeout: float | None = None,
    ) -> T:
        """Run a side effect at most once, guarded by the ledger.

        ``fn(idempotency_key, fencing_token)`` does the effect; pass both to the provider.
        A completed effect returns its recorded result without calling ``fn``. If an earlier
        attempt is in doubt: ``reconcile(key)`` decides when given; otherwise ``fn`` is
        retried under the same key if ``idempotent``; otherwise the effect (and the run)
        stops for review with ``EffectBlockedError``. A failure raises ``RetryNotDueError``
        (retry later, by policy and the error's ``retry_after``) or ``EffectBlockedError``.

        The attempt must be over ``timeout`` seconds after its claim (default: ``lease``):
        ``actae.current_deadline()`` inside ``fn``. Heartbeats renew the lease, never the
        deadline; no other worker takes the effect over before it. An answer after it is
        recorded as in doubt and raises ``DeadlinePassedError`` (an async ``fn`` is
        cancelled at it), and the next claim settles the doubt as above.
        """
        self.checkpoint()
        key = self._key("effect", name)
        with self.trace.effect(name, key) as call:
            inherited, value = self._inherited_effect(key)
            if inherited:
                call.replayed_outcome()
                return cast(T, value)
            claim = self.store.claim(
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
            self._refresh()
            try:  # the ledger notes each settlement on the channel: where, the span says
                if claim.in_doubt:
                    call.in_doubt()
                    settled = self._settle_doubt(key, claim, idempotent, reconcile)
                    if settled is not None:
                        call.noted(self.head)
                        return cast(T, workflow_value(settled))
                call.attempting()
                done = self._attempt(key, claim, fn, lease)
            except (EffectBlockedError, RetryNotDueError, DeadlinePassedError):
                call.noted(self.head)  # noted as failed, for review, or in doubt
                raise
            call.ran(self.head)
            return done

    def _settle_doubt(
        self, key: str, claim: Claim, idempotent: bool, reconcile: Reconcile | None
    ) -> dict[str, Any] | None:
        """Resolve an in-doubt claim; returns the result if the effect turned out done."""
        if reconcile is not None:
            found = reconcile(key)
            outcome = "failed" if found is None else "completed"
            info = self.store.reconcile(
                key,
                outcome,
                actor=self.worker,
                token=claim.token,
                evidence={"source": "reconcile callback", "found": found is not None},
                result=None if found is None else workflow_result(found),
            )
            self._refresh()
            return info.result
        if idempotent:
            return None
        self.store.fail_effect(
            key,
            token=claim.token,
            worker=self.worker,
            final=True,
            error="in doubt: an earlier attempt may have happened; no reconcile",
        )
        self._refresh()
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
            wait = (info.retry_at - self.store.now()).total_seconds()
            raise RetryNotDueError(key, retry_at=info.retry_at, wait=wait) from error
        self._complete(key, claim.token, value)
        return value

    def _failed(self, key: str, token: int, error: Exception) -> EffectInfo:
        """Record ``fn``'s failure; one raised at or after the deadline is in doubt instead.

        A provider client that timed out at the deadline cannot say whether the call landed,
        so the ledger refuses to schedule a retry of it (``DeadlinePassedError``).
        """
        message = f"{type(error).__name__}: {error}"
        try:
            info = self._durably(
                lambda: self.store.fail_effect(
                    key,
                    token=token,
                    worker=self.worker,
                    error=message,
                    retry_after=retry_after_of(error),
                )
            )
        except DeadlinePassedError:
            raise self._in_doubt(key, token, "it failed at or after its deadline") from error
        self._refresh()
        return info

    def _in_doubt(self, key: str, token: int, why: str) -> DeadlinePassedError:
        """Record the attempt of ``token`` as in doubt (answered late); the error to raise."""
        reason = f"in doubt: {why}; it may or may not have happened"
        info = self._durably(
            lambda: self.store.doubt_effect(key, token=token, worker=self.worker, reason=reason)
        )
        self._refresh()
        deadline = info.deadline or self.store.now()
        return DeadlinePassedError(key, token=token, deadline=deadline, now=self.store.now())

    def _complete(self, key: str, token: int, value: Any) -> None:
        """Record the effect's outcome; a result that cannot be recorded stops everything.

        The effect happened, so it must never run again on its own: the attempt is failed
        for review (an operator's ``store.override`` gives the result the workflow will see)
        and the run fails with a ``ValidationError`` naming the effect. An answer after the
        attempt's deadline is refused by the ledger and recorded as in doubt instead.
        """
        try:
            self._durably(
                lambda: self.store.complete_effect(
                    key,
                    token=token,
                    worker=self.worker,
                    result=workflow_result(value),
                    redact=self.redact,
                )
            )
        except DeadlinePassedError:
            raise self._in_doubt(key, token, "it answered after its deadline") from None
        except ValidationError as error:
            reason = f"it ran, but its result cannot be recorded: {error.reason}"
            self.store.fail_effect(
                key,
                token=token,
                worker=self.worker,
                error=f"{reason}; settle it with store.override(key, 'completed', result=...)",
                final=True,
            )
            self.store.fail_run(self.run.run_id, f"effect {key!r}: {reason}", actor=self.worker)
            self._refresh()
            raise ValidationError(f"effect {key!r}", reason) from error
        self._refresh()

    def _with_heartbeats(self, key: str, token: int, lease: float, call: Callable[[], T]) -> T:
        """``call()`` while the claim is renewed every third of ``lease``.

        In a thread the renewals run in a heartbeat thread; in an async run context (a
        greenback portal) they run as a task on the loop, so a cancelled workflow task
        stops them with it and leaves the claim to run out: in doubt, as after a kill.
        """

        def beat() -> bool:
            """One renewal; whether to keep renewing."""
            try:
                self.store.heartbeat(key, token=token, worker=self.worker, lease=lease)
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


async def _beat_as_task(beat: Callable[[], bool], every: float) -> None:
    """Renew every ``every`` seconds until cancelled, or until ``beat`` says stop."""
    while True:
        await asyncio.sleep(every)
        if not await run_in_portal(beat):
            return
