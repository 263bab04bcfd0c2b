"""The spans of a run: a worker's turn (``actae.run``) and each workflow call under it.

Plain context managers, not generators: an untraced step pays two clock readings and two
no-op metric calls.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from time import perf_counter
from typing import Self

from opentelemetry import context as otel_context
from opentelemetry.context import Context
from opentelemetry.util.types import AttributeValue

from actae.adapters.telemetry import names
from actae.adapters.telemetry.guard import METRIC, SPAN_CONTEXT
from actae.adapters.telemetry.metrics import Instruments, instruments
from actae.adapters.telemetry.tracing import Opened, Start, active_tracer, in_a_span, parent_context
from actae.domain.effects import Claim
from actae.domain.errors import RunSuspended
from actae.domain.validation import storable_trace_context
from actae.domain.values import ForkReceipt, Receipt, RunInfo

Attributes = dict[str, AttributeValue]


def run_attributes(run: RunInfo) -> Attributes:
    """What names a run on each of its spans."""
    named: Attributes = {
        names.RUN_ID: str(run.run_id),
        names.WORKFLOW_ID: run.workflow_id,
        names.AGENT_ID: run.agent_id,
    }
    if run.pins.model is not None:
        named[names.MODEL] = run.pins.model
    return named


def started(start: Start, run: RunInfo) -> None:
    """Name the run on the start's own span, ``actae.replayed`` if an earlier start kept its own."""
    repeat = run.replayed and run.trace_context != storable_trace_context(start.trace_context)
    start.describe(run_attributes(run), replayed=repeat)


def fork_attributes(fork: ForkReceipt) -> Attributes:
    """What names a fork's child run on the span it was forked in."""
    return {names.RUN_ID: str(fork.child_run_id)}


class TakenRun(Opened):
    """A worker's ``actae.run`` span, told how the turn ended."""

    def ended(self, outcome: str) -> None:
        """What the worker made of its turn (``completed``, ``failed: ...``, a wait, ...)."""
        self.describe({names.RUN_OUTCOME: outcome})


def taking(run: RunInfo, *, worker: str, sealed: bool = False) -> TakenRun:
    """The ``actae.run`` span of a worker's turn, always under the run's recorded context."""
    tracer = active_tracer()
    if tracer is None:
        return TakenRun(None, names.RUN_SPAN, None)
    attributes = {
        **run_attributes(run),
        names.WORKER: worker,
        names.CURSOR: run.cursor,
        names.STATE_VERSION: run.state_version,
    }
    parent = parent_context(run.trace_context, run.run_id)
    return TakenRun(tracer, names.RUN_SPAN, attributes, parent, sealed=sealed, run_id=run.run_id)


class Call(Opened):
    """The span of one workflow call of ``run``, told where its result is."""

    replayed = False

    def __init__(self, run: RunTrace, name: str, attributes: Attributes | None) -> None:
        super().__init__(
            run.tracer, name, attributes, run.parent(), sealed=run.sealed, run_id=run.run_id
        )
        self._run = run

    def answered(self, cursor: int, state_version: int) -> None:
        """The call was answered from the log (its own run's, or a forked-from ancestor's)."""
        self._landed(cursor, state_version, replayed=True)

    def recorded(self, receipt: Receipt) -> None:
        """The call's write: where it landed (a write recognised as a repeat is a replay)."""
        self._landed(receipt.cursor, receipt.state_version, replayed=receipt.replayed)

    def ran(self, receipt: Receipt) -> None:
        """The call's function ran now (no replay, even if its write repeated a lost reply)."""
        self._landed(receipt.cursor, receipt.state_version, replayed=False)

    def _landed(self, cursor: int, state_version: int, *, replayed: bool) -> None:
        self.replayed = replayed
        self.describe(
            {names.REPLAYED: replayed, names.CURSOR: cursor, names.STATE_VERSION: state_version}
        )

    def used(self, usage: Mapping[str, float] | None) -> None:
        """What the call consumed: tokens in OpenTelemetry's GenAI terms, and its cost."""
        if usage and self.recording:
            spent = names.USAGE_ATTRIBUTES.items()
            self.describe({attribute: usage[key] for key, attribute in spent if key in usage})


class StepCall(Call):
    """``actae.step {name}``; a step that returns is counted and timed, replayed or not."""

    _began = 0.0

    def __enter__(self) -> Self:
        self._began = perf_counter()
        return super().__enter__()

    def _ending(self, error: BaseException | None) -> None:
        if error is None:
            self._run.step_done(self.replayed, perf_counter() - self._began)


class EffectCall(Call):
    """``actae.effect {name}``, with its claim (attempt, fencing token) and its outcome."""

    outcome: str | None = None

    def claimed(self, claim: Claim) -> None:
        """The ledger's answer: an attempt granted (counted), or the effect already done."""
        self.describe(
            {
                names.EFFECT_ATTEMPT: claim.attempt,
                names.EFFECT_FENCING_TOKEN: claim.token,
                names.EFFECT_IN_DOUBT: claim.in_doubt,
            }
        )
        if claim.status == "granted":
            self._run.effect_attempted(claim.attempt)

    def replayed_outcome(self) -> None:
        """The effect had happened: its result is returned, ``fn`` not called (no cursor)."""
        self.replayed = True
        self.outcome = names.REPLAYED_OUTCOME
        self.describe({names.REPLAYED: True})

    def in_doubt(self) -> None:
        """An earlier attempt may have happened: a reconcile or a person decides."""
        self.outcome = names.IN_DOUBT

    def noted(self, head: Receipt) -> None:
        """The ledger noted the effect's settlement at ``head`` (reconciled, stopped, failed)."""
        self.ran(head)

    def attempting(self) -> None:
        """``fn`` is called now: it completes or fails, whatever came before."""
        self.outcome = None

    def _ending(self, error: BaseException | None) -> None:
        if self.recording:
            ended = self.outcome or (names.COMPLETED if error is None else names.FAILED)
            self.describe({names.EFFECT_OUTCOME: ended})


class WaitCall(Call):
    """``actae.wait {reason}``: ``decided`` (it returns) or ``suspended`` (the run waits)."""

    def _ending(self, error: BaseException | None) -> None:
        if self.recording and (error is None or isinstance(error, RunSuspended)):
            self.describe({names.WAIT_OUTCOME: "decided" if error is None else "suspended"})


class RunTrace:
    """The spans and step metrics of one run's workflow calls (a ``RunContext`` holds one)."""

    def __init__(self, run: RunInfo, *, sealed: bool = False) -> None:
        self.tracer = active_tracer()
        self.sealed = sealed
        self.run_id = run.run_id
        self.attributes = run_attributes(run)
        self._recorded = parent_context(run.trace_context, run.run_id) if self.tracer else None
        self._instruments: Instruments = instruments()
        self._executed: Attributes = {names.AGENT_ID: run.agent_id, names.REPLAYED: False}
        self._replayed: Attributes = {names.AGENT_ID: run.agent_id, names.REPLAYED: True}
        self._labels: Attributes = {names.AGENT_ID: run.agent_id}

    def parent(self) -> Context | None:
        """The current context, or outside any span the run's own (:func:`parent_context`)."""
        if self._recorded is None or in_a_span():
            return None
        return self._recorded

    def _attributes(self, operation_id: str) -> Attributes | None:
        if self.tracer is None:
            return None
        return {**self.attributes, names.OPERATION_ID: operation_id}

    def step(self, name: str, operation_id: str) -> StepCall:
        """The span of step ``name`` (``actae.step {name}``)."""
        return StepCall(self, f"{names.STEP_SPAN} {name}", self._attributes(operation_id))

    def effect(self, name: str, operation_id: str) -> EffectCall:
        """The span of effect ``name`` (``actae.effect {name}``)."""
        return EffectCall(self, f"{names.EFFECT_SPAN} {name}", self._attributes(operation_id))

    def transition(self, operation_id: str) -> Call:
        """The span of a transition (``actae.transition``)."""
        return Call(self, names.TRANSITION_SPAN, self._attributes(operation_id))

    def wait(self, reason: str, name: str) -> WaitCall:
        """The span of a wait (``actae.wait {reason}``) for ``name``."""
        attributes = None if self.tracer is None else {**self.attributes, names.WAIT_NAME: name}
        return WaitCall(self, f"{names.WAIT_SPAN} {reason}", attributes)

    @contextmanager
    def joined(self) -> Iterator[None]:
        """The block runs in the run's trace: in the current span, else in the recorded one."""
        parent, token = self.parent(), None
        if parent is not None:
            with SPAN_CONTEXT:
                token = otel_context.attach(parent)
        try:
            yield
        finally:
            if token is not None:
                with SPAN_CONTEXT:
                    otel_context.detach(token)

    def step_done(self, replayed: bool, seconds: float) -> None:
        """Count a step that returned, and how long it took."""
        labels = self._replayed if replayed else self._executed
        with METRIC:
            self._instruments.steps.add(1, labels)
            self._instruments.step_duration.record(seconds, labels)

    def effect_attempted(self, attempt: int) -> None:
        """Count an attempt of an effect (attempt 1 is no retry)."""
        with METRIC:
            self._instruments.effect_attempts.add(1, self._labels)
            if attempt > 1:
                self._instruments.effect_retries.add(1, self._labels)
