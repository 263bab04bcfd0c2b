"""Durable steps for agent code: ``store.resume(run_id, worker=...)`` gives a RunContext.

Agent code calls ``step``, ``effect``, ``record`` and ``transition`` in a fixed order. Each
call has a deterministic operation id (run + kind + name + occurrence), so when a worker dies
and the code runs again from the top, every call that already happened returns its recorded
result instead of running again: a sampled model answer is not re-sampled, and a completed
payment is not re-sent. Only the first call that has no record does real work.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast
from uuid import UUID

from actae.adapters.persistence.outages import Outage, ride_out
from actae.adapters.runtime.boundary import STOPPED, ensure_may_go_on
from actae.adapters.runtime.channel_head import ChannelHead
from actae.adapters.runtime.inheritance import Inheritance
from actae.adapters.runtime.run_ledger import Reconcile, RunLedger
from actae.adapters.telemetry.runs import RunTrace
from actae.domain.effects import STEP_RESULT, Claim, RetryPolicy
from actae.domain.errors import (
    RunStoppedError,
    RunSuspended,
    ValidationError,
)
from actae.domain.reader import StoreReader, operation_record_of
from actae.domain.redaction import Redactor
from actae.domain.validation import require_text
from actae.domain.values import OperationRecord, Receipt, RunInfo
from actae.domain.waits import Decision

PATIENCE = 60.0
"""Seconds a context outside a worker (no run lease) waits out an outage to record a result."""
log = logging.getLogger("actae.context")

if TYPE_CHECKING:
    from actae.adapters.runtime.run_lease import RunLease
    from actae.adapters.runtime.store import Store

T = TypeVar("T")


class RunContext:
    """One worker's handle on one run: durable steps, guarded effects, tracked head.

    A worker sets ``lease`` (its lease on the run) and ``outage`` (its outage log): the
    context then stops at a step boundary once the lease may be someone else's, and waits
    out a database outage to record a result for as long as the lease holds. Each call is a
    span in the run's trace (``trace``, docs/telemetry.md).
    """

    lease: RunLease | None = None

    def __init__(
        self,
        store: Store,
        run: RunInfo,
        worker: str,
        reader: StoreReader,
        *,
        redact: Redactor | None = None,
    ) -> None:
        self.store = store
        self.run = run
        self.worker = worker
        self.redact = redact
        """The workflow's redactor: run on what its steps, records and effects return."""
        self._reader = reader
        self._occurrences: Counter[tuple[str, str]] = Counter()
        self._head = ChannelHead(store, run.channel_id)
        self.outage = Outage(f"run {run.run_id}", log.warning)
        self.trace = RunTrace(run, sealed=store.encrypting)
        self._inherited = Inheritance(store, reader, run)
        self._ledger = RunLedger(
            self, self._inherited, refresh=self._head.refresh, durably=self._durably
        )

    @property
    def run_id(self) -> Any:
        """The run this context drives."""
        return self.run.run_id

    @property
    def head(self) -> Receipt:
        """The last channel event this context knows of."""
        return self._head.receipt

    def _key(self, kind: str, name: str) -> str:
        """The operation id of this call: run, kind, name and occurrence (now counted)."""
        key = self._next_key(kind, name)
        self._occurrences[(kind, name)] += 1
        return key

    def _next_key(self, kind: str, name: str) -> str:
        """The key the next ``_key(kind, name)`` returns (nothing is counted yet)."""
        count = self._occurrences[(kind, _named(kind, name))] + 1
        return f"{self.run.run_id}:{kind}:{name}:{count}"

    def _durably(self, write: Callable[[], T]) -> T:
        """``write()``, waited through a database outage while this worker holds the run.

        What precedes it already ran (a step, a tool call): unrecorded, it would run again.
        A transient failure is retried until the lease may be someone else's (their write
        would be refused anyway) or, outside a worker, for ``PATIENCE`` seconds.
        """
        lease = self.lease
        if lease is None:
            return ride_out(write, self.outage, within=PATIENCE)
        return ride_out(write, self.outage, give_up=lambda: lease.lost)

    # -- steps ----------------------------------------------------------------------------

    def checkpoint(self) -> RunInfo:
        """A step boundary: stop here unless the run may go on.

        Raises ``RunStoppedError`` if the run was paused, cancelled or ended, or is past its
        deadline (which fails it); ``RunSuspended`` if it waits.
        """
        return self._checkpoint(None)[0]

    def _checkpoint(self, key: str | None) -> tuple[RunInfo, OperationRecord | None]:
        """``checkpoint()``, reading the operation recorded under ``key`` in the same trip."""
        if self.lease is not None:
            self.lease.ensure_held()
        info, found = self._reader.run_and_operation(self.run.run_id, self.run.channel_id, key)
        ensure_may_go_on(self.store, info, self.worker)
        if info.cursor != self._head.receipt.cursor:
            self._head.adopt_notes()
        return info, operation_record_of(found)

    def step(
        self,
        name: str,
        fn: Callable[[], T],
        *,
        usage: Callable[[T], Mapping[str, float]] | Mapping[str, float] | None = None,
        retry: RetryPolicy | None = None,
    ) -> T:
        """Run ``fn`` once and record its (JSON) result; afterwards return the record.

        ``usage`` (a mapping, or a function of the result) records what the step consumed,
        e.g. ``{"input_tokens": 700, "output_tokens": 112, "cost": 0.02}`` (the names the read
        models and traces total); the run's budget is checked against the totals.
        With ``retry``, a failing ``fn`` is tried again by the policy (``retry_after`` on the
        exception wins when longer), raising ``RetryNotDueError`` until the next attempt is
        due; an exhausted policy fails the run. A result that cannot be recorded (not plain
        JSON, too large) fails the run with ``ValidationError`` naming the step: ``fn`` is
        not called again on its own.
        """
        _, recorded = self._checkpoint(self._next_key("step", name))
        key = self._key("step", name)
        with self.trace.step(name, key) as call:
            if recorded is not None:
                call.answered(recorded.result["cursor"], recorded.result["state_version"])
                return cast(T, self._value_at(recorded.result["cursor"]))
            inherited = self._inherited.call(key)
            if inherited is not None:
                call.answered(inherited.cursor, inherited.state_version)
                return cast(T, inherited.contents()["value"])
            if self.run.retries:
                self._ledger.close_earlier_rounds(key)
            value, claim = (
                (fn(), None) if retry is None else self._ledger.step(key, name, fn, retry)
            )
            spent = usage(value) if callable(usage) else usage
            call.used(spent)
            call.ran(self._record_step(key, name, value, claim, spent))
            return value

    def _record_step(
        self,
        key: str,
        name: str,
        value: Any,
        claim: Claim | None,
        usage: Mapping[str, float] | None,
    ) -> Receipt:
        """Record a step's result; one that cannot be recorded fails the run, naming the step."""
        try:
            if claim is not None:  # the ledger holds it first: a crash now still replays it
                self._ledger.complete(self._ledger.attempts_key(key), claim.token, value)
            receipt = self._head.past_notes(
                lambda: self._durably(
                    lambda: self.store.record(
                        self.run.channel_id,
                        kind=STEP_RESULT,
                        payload={"name": name, "value": value},
                        expected_cursor=self._head.receipt.cursor,
                        operation_id=key,
                        usage=usage,
                        redact=self.redact,
                    )
                )
            )
        except ValidationError as error:
            reason = f"its result cannot be recorded: {error.reason}"
            self.store.fail_run(self.run.run_id, f"step {name!r}: {reason}", actor=self.worker)
            raise ValidationError(f"step {name!r}", reason) from error
        self._head.adopt(receipt)
        return receipt

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
        """Run a side effect at most once, guarded by the ledger (``run_ledger``).

        ``fn(idempotency_key, fencing_token)`` does the effect; pass both to the provider.
        A completed effect returns its recorded result without calling ``fn``. An earlier
        attempt in doubt is settled by ``reconcile(key)``, else retried if ``idempotent``,
        else stopped for review (``EffectBlockedError``). A failure raises
        ``RetryNotDueError`` (by policy and the error's ``retry_after``) or
        ``EffectBlockedError``. The attempt must be over ``timeout`` seconds after its claim
        (default ``lease``; ``actae.current_deadline()`` in ``fn``): an answer after it is
        recorded as in doubt and raises ``DeadlinePassedError``.
        """
        self.checkpoint()
        return self._ledger.effect(
            name,
            self._key("effect", name),
            fn,
            idempotent=idempotent,
            reconcile=reconcile,
            lease=lease,
            retry=retry,
            request=request,
            timeout=timeout,
        )

    def record(self, kind: str, payload: dict[str, Any]) -> Receipt:
        """Record an event on the run's channel (once, also across re-runs)."""
        _, recorded = self._checkpoint(self._next_key("record", kind))
        key = self._key("record", kind)
        if (replayed := self._replayed(key, recorded)) is not None:
            return replayed
        receipt = self.store.record(
            self.run.channel_id,
            kind=kind,
            payload=payload,
            expected_cursor=self._head.receipt.cursor,
            operation_id=key,
            redact=self.redact,
        )
        self._head.adopt(receipt)
        return receipt

    def transition(
        self,
        *,
        state: dict[str, Any],
        kind: str = "transition",
        payload: dict[str, Any] | None = None,
    ) -> Receipt:
        """Commit the next state version (once, also across re-runs).

        A re-run replays the recorded transition by its position in the workflow, whatever
        state the code computes now: after a schema migration the code may build the same
        step's state differently, and the history, not the new code, says what happened.
        """
        _, recorded = self._checkpoint(self._next_key("transition", kind))
        key = self._key("transition", kind)
        with self.trace.transition(key) as call:
            receipt = self._replayed(key, recorded)
            if receipt is None:
                receipt = self.store.transition(
                    self.run.channel_id,
                    kind=kind,
                    payload=payload or {},
                    state=state,
                    expected_version=self._head.receipt.state_version,
                    expected_cursor=self._head.receipt.cursor,
                    operation_id=key,
                )
                self._head.adopt(receipt)
            call.recorded(receipt)
        return receipt

    def _replayed(self, key: str, recorded: OperationRecord | None) -> Receipt | None:
        """The receipt of the write ``key`` recorded earlier, or inherited from a fork."""
        if recorded is not None:
            at = recorded.result
            return _replay(
                self.run.channel_id, at["cursor"], at["state_version"], recorded.operation_id
            )
        event = self._inherited.call(key)
        if event is None:
            return None
        return _replay(event.channel_id, event.cursor, event.state_version, event.operation_id)

    def state(self) -> dict[str, Any]:
        """The state version in force at this context's head."""
        return self.store.state_at(self.run.channel_id, cursor=self._head.receipt.cursor).state

    def _value_at(self, cursor: int) -> Any:
        (event,) = self.store.events(self.run.channel_id, after=cursor - 1, limit=1)
        return event.contents()["value"]

    # -- waits and children ---------------------------------------------------------------

    def wait_for_approval(
        self, name: str, *, expires_in: float | None = None, on_expiry: str = "fail"
    ) -> Decision:
        """Wait (durably) until someone calls ``store.approve``/``store.deny`` for ``name``.

        Returns the decision (``decision.approved``). If ``expires_in`` seconds pass first,
        the run fails (``on_expiry="fail"``) or stays waiting marked escalated
        (``"escalate"``). Raises ``RunSuspended`` while waiting: the worker lets go and the
        workflow runs again from the top once decided.
        """
        return self._wait("approval", name, seconds=expires_in, on_expiry=on_expiry)

    def wait_for_signal(self, name: str, *, timeout: float | None = None) -> Decision:
        """Wait until ``store.signal(run_id, name, payload)``.

        If ``timeout`` seconds pass first, the decision's kind is ``expired``.
        """
        return self._wait("signal", name, seconds=timeout)

    def sleep(self, seconds: float) -> None:
        """Wait durably for ``seconds`` on the store's clock (survives restarts)."""
        self._wait("timer", self._key("sleep", "timer"), seconds=seconds)

    def start_child(
        self,
        workflow_id: str,
        *,
        agent_id: str,
        state: dict[str, Any],
        pins: dict[str, Any] | None = None,
    ) -> RunInfo:
        """Start a child run once (a re-run returns the same child, whatever it passes now)."""
        _, recorded = self._checkpoint(self._next_key("child", workflow_id))
        key = self._key("child", workflow_id)
        if recorded is not None:
            return self.store.run(recorded.result["run_id"])
        with self.trace.joined():  # the child's trace continues from where the parent is
            return self.store.start_run(
                workflow_id,
                agent_id=agent_id,
                state=state,
                pins=pins,
                parent_run_id=self.run.run_id,
                operation_id=key,
            )

    def wait_for_child(self, child: RunInfo) -> Decision:
        """Wait until the child completes or fails.

        The decision's payload has the child's ``status``, ``result`` and ``error``.
        """
        return self._wait("child", f"child:{child.run_id}")

    def _wait(
        self, reason: str, name: str, *, seconds: float | None = None, on_expiry: str | None = None
    ) -> Decision:
        with self.trace.wait(reason, name):
            return self._decision(reason, name, seconds, on_expiry)

    def _decision(
        self, reason: str, name: str, seconds: float | None, on_expiry: str | None
    ) -> Decision:
        """The decision the run got for its wait; else it starts waiting (``RunSuspended``)."""
        info = self.store.run(self.run.run_id)
        decided = info.decisions.get(name) or self._inherited.decision(name)
        if decided is not None:
            if info.status in STOPPED:
                raise RunStoppedError(info.run_id, status=info.status.value)
            return decided
        self.checkpoint()
        info = self.store.suspend(
            self.run.run_id,
            reason=reason,
            name=name,
            seconds=seconds,
            on_expiry=on_expiry if reason == "approval" else None,
        )
        decided = info.decisions.get(name)
        if decided is not None:  # it came between the look and the wait: the run goes on
            return decided
        self._head.refresh()
        until = info.waiting.until if info.waiting else None
        raise RunSuspended(info.run_id, reason=reason, name=name, until=until)


def _replay(channel_id: UUID, cursor: int, state_version: int, operation_id: str | None) -> Receipt:
    return Receipt(
        channel_id=channel_id,
        cursor=cursor,
        state_version=state_version,
        operation_id=operation_id,
        replayed=True,
    )


NAME_FIELDS = {"record": "kind", "transition": "kind", "child": "workflow_id"}
"""The argument a call's name comes from, when it is not ``name``."""


def _named(kind: str, name: str) -> str:
    """``name``, checked before it becomes part of an operation id (and of nothing else)."""
    return require_text(NAME_FIELDS.get(kind, "name"), name)
