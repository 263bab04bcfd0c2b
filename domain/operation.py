"""The Operation aggregate: the durable identity of one logical invocation.

Its id is uuid5 of the caller's ``operation_id``, which its first row carries, unique in the
store: two attempts of one invocation contend and the store decides which happened. It is
a *command* (start, fork) executed once with its result, or an *effect* of the ledger:
claims under leases with strictly increasing fencing tokens, completions, retries.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from hashlib import sha1
from typing import TYPE_CHECKING, Any, ClassVar
from uuid import UUID

from pydantic import Field

from actae.domain.aggregate import Acted, Aggregate, picked
from actae.domain.channel import constructed
from actae.domain.effects import (
    Attempt,
    EffectInfo,
    EffectStatus,
    RetryPolicy,
    effect_status,
    lease_ran_out,
)
from actae.domain.errors import (
    DeadlineNotPassedError,
    DeadlinePassedError,
    EffectBlockedError,
    FencingError,
    LeaseHeldError,
    NotHolderError,
    OperationConflictError,
    RetryNotDueError,
)

OPERATION_NAMESPACE = UUID("6f1e2a4c-3b5d-5e7f-8a9b-0c1d2e3f4a5b")
NAMESPACE_BYTES = OPERATION_NAMESPACE.bytes
UNKNOWN = "result holder expires_at deadline retry_at last_error first_claimed_at"
"""What an effect's ledger does not know before its first claim."""


class Operation(Aggregate, type_name="Operation"):
    """A command that happened once, or an effect and the history of its attempts."""

    if TYPE_CHECKING:  # set by events' apply(); not dataclass fields
        operation_id: str
        command: str
        fingerprint: str
        result: dict[str, Any] | None
        run_id: UUID
        channel_id: UUID
        request: dict[str, Any]
        policy: RetryPolicy
        token: int
        holder: str | None
        expires_at: datetime | None
        deadline: datetime | None
        in_doubt: bool
        retry_at: datetime | None
        needs_review: bool
        abandoned: bool
        last_error: str | None
        first_claimed_at: datetime | None
        attempts: list[Attempt]
        contents_withheld: str | None

    class Executed(Aggregate.Created, type_name="Operation.Executed"):
        """A command identified by ``operation_id`` was executed and produced ``result``."""

        operation_id: str
        command: str
        fingerprint: str
        result: dict[str, Any]

        @property
        def stored_operation_id(self) -> str:
            """The command's operation id: its row is the operation's record."""
            return self.operation_id

        def apply(self, aggregate: Any) -> None:
            """Remember the command's content fingerprint and its result."""
            aggregate.operation_id = self.operation_id
            aggregate.command = self.command
            aggregate.fingerprint = self.fingerprint
            aggregate.result = self.result

    class Registered(Aggregate.Created, type_name="Operation.Registered"):
        """A side effect was declared for a run, with its request and retry policy."""

        contents: ClassVar[tuple[str, ...]] = ("request",)

        operation_id: str
        run_id: UUID
        channel_id: UUID
        request: dict[str, Any]
        fingerprint: str
        policy: RetryPolicy

        @property
        def stored_operation_id(self) -> str:
            """The effect's key: effects share the one namespace of operation ids."""
            return self.operation_id

        def apply(self, aggregate: Any) -> None:
            """Start an effect's ledger: nobody holds it, nothing is known yet."""
            vars(aggregate).update(
                picked(self, "operation_id fingerprint run_id channel_id request policy"),
                command="effect",
                token=0,
                attempts=[],
                contents_withheld=self.withheld,
                **dict.fromkeys(UNKNOWN.split()),
                **dict.fromkeys(("in_doubt", "needs_review", "abandoned"), False),
            )

    class Claimed(Aggregate.Event, type_name="Operation.Claimed"):
        """A worker claimed the effect under a lease; ``token`` fences everyone older."""

        worker: str
        token: int
        expires_at: datetime
        in_doubt: bool
        deadline: datetime | None = None
        """When the attempt must be over (claim time plus timeout); heartbeats never move it."""

        def apply(self, aggregate: Any) -> None:
            """Hand the effect to the worker; an unanswered earlier attempt counts as expired."""
            if aggregate.holder is not None:
                aggregate.settle_attempt("expired", "lease ran out without an answer")
            vars(aggregate).update(
                picked(self, "token expires_at deadline in_doubt"),
                holder=self.worker,
                retry_at=None,
                first_claimed_at=aggregate.first_claimed_at or self.timestamp,
            )
            attempt = Attempt(
                attempt=len(aggregate.attempts) + 1,
                token=self.token,
                worker=self.worker,
                claimed_at=self.timestamp,
                deadline=self.deadline,
            )
            aggregate.attempts.append(attempt)

    class Renewed(Aggregate.Event, type_name="Operation.Renewed"):
        """The holder extended its lease (a heartbeat)."""

        token: int
        expires_at: datetime

        def apply(self, aggregate: Any) -> None:
            """Move the lease's expiry."""
            aggregate.expires_at = self.expires_at

    class Doubted(Aggregate.Event, type_name="Operation.Doubted"):
        """The holder cannot say whether its attempt happened; its lease ends at once.

        It answered after its deadline, or was cancelled at it: the next claim settles it.
        """

        token: int
        expires_at: datetime
        reason: str

        def apply(self, aggregate: Any) -> None:
            """Close the attempt as in doubt; its lease ends now."""
            aggregate.settle_attempt("in_doubt", self.reason)
            aggregate.expires_at = self.expires_at

    class Completed(Aggregate.Event, type_name="Operation.Completed"):
        """The effect happened and produced ``result``."""

        contents: ClassVar[tuple[str, ...]] = ("result",)

        token: int
        result: dict[str, Any]
        run_id: UUID | None = None
        """The effect's run, whose data key seals the result."""
        redacted: dict[str, int] = Field(default_factory=dict)
        """Secrets removed from ``result`` before it was written, counted by pattern name."""

        def apply(self, aggregate: Any) -> None:
            """Settle the effect for good."""
            aggregate.settled("completed", None)
            aggregate.result = None if self.withheld else self.result

    class Failed(Aggregate.Event, type_name="Operation.Failed"):
        """An attempt failed; it is retried at ``retry_at``, or needs review when ``None``."""

        contents: ClassVar[tuple[str, ...]] = ("error",)

        token: int
        error: str
        retry_at: datetime | None
        run_id: UUID | None = None
        """The effect's run, whose data key seals the error."""

        def apply(self, aggregate: Any) -> None:
            """Release the effect and schedule the next attempt (or stop for review)."""
            aggregate.settled("failed", self.error)
            aggregate.last_error = self.error
            aggregate.retry_at = self.retry_at
            aggregate.needs_review = self.retry_at is None

    class Reconciled(Aggregate.Event, type_name="Operation.Reconciled"):
        """Someone checked with the provider whether the doubtful effect happened."""

        contents: ClassVar[tuple[str, ...]] = ("evidence", "result")

        outcome: str
        actor: str
        evidence: dict[str, Any]
        result: dict[str, Any] | None
        keeps_claim: bool
        run_id: UUID | None = None
        """The effect's run, whose data key seals the evidence."""
        override_reason: str | None = None
        """An operator's reason when this is an override, in clear for the audit trail."""

        def apply(self, aggregate: Any) -> None:
            """Settle the doubt: completed for good, or known not to have happened."""
            if self.outcome == "completed":
                aggregate.settled("completed", f"reconciled by {self.actor}")
                aggregate.result = None if self.withheld else self.result
            elif not self.keeps_claim:
                aggregate.settled("failed", f"reconciled by {self.actor}")
            aggregate.in_doubt = False
            aggregate.needs_review = False

    class Abandoned(Acted, type_name="Operation.Abandoned"):
        """An operator gave up on the effect; it will not be attempted again."""

        def apply(self, aggregate: Any) -> None:
            """Close the effect without an outcome."""
            aggregate.settled("abandoned", self.reason)
            aggregate.abandoned = True

    # -- identity -------------------------------------------------------------------------

    @staticmethod
    def id_for(operation_id: str) -> UUID:
        """``uuid5(OPERATION_NAMESPACE, operation_id)``, without ``uuid5``'s argument handling."""
        digest = sha1(NAMESPACE_BYTES + operation_id.encode(), usedforsecurity=False).digest()
        return UUID(bytes=digest[:16], version=5)

    @classmethod
    def executed(cls, *, operation_id: str, at: datetime, **fields: Any) -> Operation.Executed:
        """A command's record (``fields``: command, fingerprint, result); no aggregate is built."""
        return cls.Executed(
            originator_id=cls.id_for(operation_id),
            originator_version=1,
            timestamp=at,
            originator_topic=cls.type_name,
            operation_id=operation_id,
            **fields,
        )

    @classmethod
    def first_claim(
        cls,
        *,
        effect_key: str,
        worker: str,
        lease: float,
        timeout: float | None,
        at: datetime,
        **fields: Any,
    ) -> tuple[Operation.Registered, Operation.Claimed]:
        """A new effect's :class:`Registered` and the claim :meth:`claim` would grant it.

        Built from the command's validated values (``fields``: :class:`Registered`'s) with no
        aggregate and no validation, which would only repeat the command's; the request is copied.
        """
        effect_id = cls.id_for(effect_key)
        registered = constructed(
            cls.Registered,
            {
                **fields,
                "originator_id": effect_id,
                "originator_version": 1,
                "timestamp": at,
                "originator_topic": cls.type_name,
                "operation_id": effect_key,
                "request": dict(fields["request"]),
            },
        )
        claim = _claim_fields(worker, 1, lease, timeout, in_doubt=False, now=at)
        values = {"originator_id": effect_id, "originator_version": 2, "timestamp": at, **claim}
        return registered, constructed(cls.Claimed, values)

    def ensure_same(self, fingerprint: str) -> None:
        """Refuse a repeat whose content differs from the original's."""
        if fingerprint != self.fingerprint:
            raise OperationConflictError(
                self.operation_id,
                recorded_fingerprint=self.fingerprint,
                presented_fingerprint=fingerprint,
            )

    @property
    def recorded_result(self) -> dict[str, Any]:
        """The result a command returned (replayed on repeats)."""
        if self.result is None:  # pragma: no cover - commands are recorded with a result
            msg = f"operation {self.operation_id!r} has no recorded result"
            raise LookupError(msg)
        return self.result

    # -- ledger state ---------------------------------------------------------------------

    @property
    def is_effect(self) -> bool:
        """Whether this operation is a ledger effect (not a one-shot command)."""
        return self.command == "effect"

    def status(self, now: datetime) -> EffectStatus:
        """Where the effect stands at ``now`` (a lease past its expiry is in doubt)."""
        status = effect_status(
            abandoned=self.abandoned,
            completed=self.result is not None,
            needs_review=self.needs_review,
            held=self.holder is not None,
            retry_at=self.retry_at,
        )
        if status is EffectStatus.CLAIMED and lease_ran_out(self.expires_at, now):
            return EffectStatus.IN_DOUBT
        return status

    def info(self, now: datetime) -> EffectInfo:
        """Everything the ledger knows about this effect, as seen at ``now``."""
        status = self.status(now)
        return EffectInfo(
            **picked(self, "run_id token holder expires_at retry_at last_error result request"),
            effect_key=self.operation_id,
            status=status,
            attempt=len(self.attempts),
            in_doubt=self.in_doubt or status is EffectStatus.IN_DOUBT,
            attempts=list(self.attempts),
            deadline=self.deadline,
        )

    def settle_attempt(self, outcome: str, detail: str | None) -> None:
        """Write the outcome of the open attempt into the history (events call this)."""
        if self.attempts and self.attempts[-1].outcome is None:
            last = self.attempts[-1]
            self.attempts[-1] = last.model_copy(update={"outcome": outcome, "detail": detail})

    def settled(self, outcome: str, detail: str | None) -> None:
        """Close the open attempt with ``outcome``; nobody holds the effect, nor doubts it."""
        self.settle_attempt(outcome, detail)
        self.holder = None
        self.in_doubt = False

    # -- ledger commands ------------------------------------------------------------------

    def claim(
        self, *, worker: str, lease: float, timeout: float | None, now: datetime
    ) -> Operation.Claimed | None:
        """Grant a claim (its event), or refuse it with the reason; ``None``: completed.

        ``timeout`` ``None``: no deadline (a step's attempt counter).
        """
        status = self.status(now)
        if status is EffectStatus.COMPLETED:
            return None
        if status in (EffectStatus.ABANDONED, EffectStatus.NEEDS_REVIEW):
            detail = self.last_error or "no further attempts are allowed"
            raise EffectBlockedError(self.operation_id, status=status.value, detail=detail)
        if status is EffectStatus.CLAIMED:
            raise self._lease_held(now)
        if status is EffectStatus.IN_DOUBT:
            self.ensure_deadline_passed(now)
        if self.retry_at is not None and now < self.retry_at:
            wait = (self.retry_at - now).total_seconds()
            raise RetryNotDueError(self.operation_id, retry_at=self.retry_at, wait=wait)
        in_doubt = status is EffectStatus.IN_DOUBT
        claim = _claim_fields(worker, self.token + 1, lease, timeout, in_doubt=in_doubt, now=now)
        self.trigger_event(self.Claimed, timestamp=now, **claim)
        claimed: Operation.Claimed = self.pending_events[-1]  # type: ignore[assignment]
        return claimed

    def ensure_deadline_passed(self, now: datetime) -> None:
        """Refuse to act over the open attempt before its deadline: its call may still land."""
        if self.deadline is not None and now < self.deadline:
            raise DeadlineNotPassedError(
                self.operation_id,
                holder=self.holder or "unknown",
                token=self.token,
                deadline=self.deadline,
            )

    def _lease_held(self, now: datetime) -> LeaseHeldError:
        return LeaseHeldError(
            self.operation_id, holder=self.holder or "unknown", expires_at=self.expires_at or now
        )

    def ensure_held(self, token: int, now: datetime, *, worker: str | None) -> None:
        """Refuse unless ``token`` is current, open and held by ``worker`` (``None``: operator)."""
        if token != self.token:
            raise FencingError(self.operation_id, presented_token=token, current_token=self.token)
        status = self.status(now)
        if status not in (EffectStatus.CLAIMED, EffectStatus.IN_DOUBT):
            raise EffectBlockedError(
                self.operation_id, status=status.value, detail=f"token {token} holds no claim"
            )
        if worker is not None:
            self.ensure_holder(token, worker)

    def ensure_holder(self, token: int, worker: str) -> None:
        """Refuse a worker other than the one the attempt of ``token`` was granted to."""
        holder = next((a.worker for a in self.attempts if a.token == token), None)
        if holder != worker:
            raise NotHolderError(
                self.operation_id, worker=worker, holder=holder or "nobody", token=token
            )

    def heartbeat(self, *, token: int, worker: str, lease: float, now: datetime) -> None:
        """Extend the holder's lease."""
        self.ensure_held(token, now, worker=worker)
        self.trigger_event(
            self.Renewed, timestamp=now, token=token, expires_at=now + timedelta(seconds=lease)
        )

    def complete(
        self,
        *,
        token: int,
        worker: str,
        result: dict[str, Any],
        now: datetime,
        redacted: dict[str, int] | None = None,
    ) -> None:
        """Record that the effect happened, before its deadline (``DeadlinePassedError``)."""
        self.ensure_held(token, now, worker=worker)
        self._ensure_in_time(token, now)
        self._sealed(self.Completed, now, token=token, result=result, redacted=redacted or {})

    def _sealed(self, event: type[Aggregate.Event], now: datetime, **fields: Any) -> None:
        """Trigger ``event``, whose contents the data key of the effect's run seals."""
        self.trigger_event(event, timestamp=now, run_id=self.run_id, **fields)

    def _ensure_in_time(self, token: int, now: datetime) -> None:
        if self.deadline is not None and now >= self.deadline:
            raise DeadlinePassedError(
                self.operation_id, token=token, deadline=self.deadline, now=now
            )

    def doubt(self, *, token: int, worker: str, reason: str, now: datetime) -> None:
        """The holder cannot say whether its attempt happened: in doubt from ``now`` on."""
        self.ensure_held(token, now, worker=worker)
        self.trigger_event(self.Doubted, timestamp=now, token=token, expires_at=now, reason=reason)

    def fail(
        self,
        *,
        token: int,
        worker: str,
        error: str,
        retry_after: float | None,
        final: bool,
        draw: float,
        now: datetime,
    ) -> None:
        """Record a failed attempt and when to try again; a ``final`` one leaves it for review.

        One to retry is refused from the deadline on, as a late answer is: its call may have landed.
        """
        self.ensure_held(token, now, worker=worker)
        if not final:
            self._ensure_in_time(token, now)
        retry_at, why_not = (None, None) if final else self._next_attempt_at(retry_after, draw, now)
        if why_not is not None:
            error = f"{error} (not retried: {why_not})"
        self._sealed(self.Failed, now, token=token, error=error, retry_at=retry_at)

    def _next_attempt_at(
        self, retry_after: float | None, draw: float, now: datetime
    ) -> tuple[datetime | None, str | None]:
        """When to try again, or ``None`` and why the policy allows no further attempt."""
        policy = self.policy
        if len(self.attempts) >= policy.max_attempts:
            return None, f"all {policy.max_attempts} attempts of the retry policy are used"
        delay = max(policy.backoff(len(self.attempts), draw), retry_after or 0.0)
        retry_at = now + timedelta(seconds=delay)
        started = self.first_claimed_at or now
        if (retry_at - started).total_seconds() > policy.max_total:
            asked = (
                f"Retry-After {retry_after:g} s"
                if retry_after and delay == retry_after
                else f"the next backoff ({delay:.0f} s)"
            )
            return None, (
                f"{asked} would end past the retry policy's total budget of "
                f"{policy.max_total:g} s from the first attempt"
            )
        return retry_at, None

    def reconcile(
        self,
        *,
        outcome: str,
        actor: str,
        evidence: dict[str, Any],
        result: dict[str, Any] | None,
        token: int | None,
        now: datetime,
    ) -> None:
        """Settle a doubtful or blocked effect from what the provider says happened."""
        status = self.status(now)
        if status is EffectStatus.IN_DOUBT:
            self.ensure_deadline_passed(now)
        if token is not None:
            self.ensure_held(token, now, worker=None)
        elif status is EffectStatus.CLAIMED:
            raise self._lease_held(now)
        elif status not in (EffectStatus.IN_DOUBT, EffectStatus.NEEDS_REVIEW):
            detail = "only an effect in doubt or needing review can be reconciled"
            raise EffectBlockedError(self.operation_id, status=status.value, detail=detail)
        reason = evidence.get(OVERRIDE_REASON)
        self._sealed(
            self.Reconciled,
            now,
            outcome=outcome,
            actor=actor,
            evidence=evidence,
            result=result,
            keeps_claim=token is not None and outcome == "failed",
            override_reason=reason if isinstance(reason, str) else None,
        )

    def abandon(self, *, actor: str, reason: str, now: datetime) -> None:
        """Give up on the effect for good (not allowed once it completed)."""
        status = self.status(now)
        if status in (EffectStatus.COMPLETED, EffectStatus.ABANDONED):
            raise EffectBlockedError(
                self.operation_id, status=status.value, detail="it is already settled"
            )
        self.trigger_event(self.Abandoned, timestamp=now, actor=actor, reason=reason)


def _claim_fields(
    worker: str, token: int, lease: float, timeout: float | None, *, in_doubt: bool, now: datetime
) -> dict[str, Any]:
    """A claim's :class:`Operation.Claimed` fields: its lease and deadline counted from ``now``."""
    expires_at = now + timedelta(seconds=lease)
    deadline = None
    if timeout is not None:
        deadline = expires_at if timeout == lease else now + timedelta(seconds=timeout)
    return {
        "worker": worker,
        "token": token,
        "expires_at": expires_at,
        "in_doubt": in_doubt,
        "deadline": deadline,
    }


OVERRIDE_REASON = "override_reason"
"""The member of an override's evidence that holds the operator's reason."""
