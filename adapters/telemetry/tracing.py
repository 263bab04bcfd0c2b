"""Spans through OpenTelemetry's API, and the trace context a run keeps to stay one trace.

Until the application configures an SDK no span is even opened. ``start_run`` keeps the
context it started in (W3C headers), and later spans open under it (:func:`parent_context`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import KW_ONLY, dataclass, field
from types import TracebackType
from typing import Self
from uuid import UUID, uuid5

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import (
    INVALID_SPAN,
    NonRecordingSpan,
    Span,
    SpanContext,
    Status,
    StatusCode,
    TraceFlags,
)
from opentelemetry.util.types import Attributes

from actae.adapters.telemetry.guard import (
    EXTRACT,
    INJECT,
    PROVIDER,
    SPAN_ATTRIBUTES,
    SPAN_CONTEXT,
    SPAN_END,
    SPAN_ERROR,
    SPAN_START,
)
from actae.adapters.telemetry.names import REPLAYED, RUN_SPAN, SCOPE, SCOPE_VERSION
from actae.domain.disclosure import error_text
from actae.domain.errors import RunSuspended
from actae.domain.validation import MAX_TEXT_LENGTH

NOT_KEPT = frozenset({"baggage"})  # the caller's data, not the trace's: the log keeps it forever
API_PROVIDERS = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)  # they record nothing


def active_tracer() -> trace.Tracer | None:
    """Actae's tracer from the provider in force now; None while none can record anything."""
    with PROVIDER:
        provider = trace.get_tracer_provider()
        if isinstance(provider, API_PROVIDERS):
            return None
        tracer = provider.get_tracer(SCOPE, SCOPE_VERSION)
        return None if isinstance(tracer, trace.NoOpTracer) else tracer
    return None


def span_name(prefix: str, name: object) -> str:
    """``"{prefix} {name}"``; the prefix alone for a name the call is about to refuse."""
    if isinstance(name, str) and 0 < len(name) <= MAX_TEXT_LENGTH:
        return f"{prefix} {name}"
    return prefix


@dataclass(eq=False)
class Opened:
    """A span, current while the ``with`` block runs (none without a ``tracer``)."""

    tracer: trace.Tracer | None
    name: str
    attributes: Attributes
    parent: Context | None = None
    _: KW_ONLY
    sealed: bool = False
    run_id: UUID | None = None
    span: Span = field(default=INVALID_SPAN, init=False)
    recording: bool = field(default=False, init=False)
    _opened: bool = field(default=False, init=False)
    _token: object = field(default=None, init=False)

    def __enter__(self) -> Self:
        if self.tracer is not None:
            with SPAN_START:
                opened = self.tracer.start_span(
                    self.name, context=self.parent, attributes=self.attributes
                )
                self.span, self._opened = opened, True
                self.recording = opened.is_recording()
            if self._opened:
                with SPAN_CONTEXT:
                    self._token = otel_context.attach(trace.set_span_in_context(self.span))
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._ending(error)
        if not self._opened:
            return
        if isinstance(error, Exception):
            failed(self.span, error, sealed=self.sealed, run_id=self.run_id)
        if self._token is not None:
            with SPAN_CONTEXT:
                otel_context.detach(self._token)  # type: ignore[arg-type]
        with SPAN_END:
            self.span.end()

    def _ending(self, error: BaseException | None) -> None:
        """What a kind of span does as its block ends, before the span ends (opened or not)."""

    def describe(self, attributes: Attributes) -> None:
        """Set ``attributes`` on the span (nothing when it records nothing)."""
        if self.recording and attributes:
            with SPAN_ATTRIBUTES:
                self.span.set_attributes(attributes)


def failed(
    target: Span,
    error: BaseException,
    *,
    sealed: bool = False,
    run_id: UUID | None = None,
    cursor: int | None = None,
) -> None:
    """Record ``error`` on ``target``, status ERROR; on a ``sealed`` store its type only."""
    if isinstance(error, RunSuspended):
        return
    with SPAN_ERROR:
        if target.is_recording():
            text = error_text(error, sealed=sealed, run_id=run_id, cursor=cursor)
            if sealed:
                target.add_event(EXCEPTION_EVENT, {"exception.type": _type_name(error)})
            else:
                target.record_exception(error)
            target.set_status(Status(StatusCode.ERROR, text))


EXCEPTION_EVENT = "exception"  # the event record_exception adds


def _type_name(error: BaseException) -> str:  # as record_exception names it
    kind = type(error)
    if kind.__module__ in ("__main__", "builtins"):
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"


def failed_here(
    error: BaseException,
    *,
    sealed: bool = False,
    run_id: UUID | None = None,
    cursor: int | None = None,
) -> None:
    """:func:`failed` on the current span."""
    with SPAN_ERROR:
        failed(trace.get_current_span(), error, sealed=sealed, run_id=run_id, cursor=cursor)


def in_a_span() -> bool:
    """Whether a (valid) span is current: its context is where new work belongs."""
    with SPAN_CONTEXT:
        return trace.get_current_span().get_span_context().is_valid
    return False


def current_trace_context() -> dict[str, str]:
    """The current context as the propagator's headers, to keep; empty if it fails."""
    with INJECT:
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        for header in NOT_KEPT:
            carrier.pop(header, None)
        return carrier
    return {}


def parent_context(trace_context: Mapping[str, str], run_id: UUID) -> Context:
    """The context to open the run's spans under: the one it kept, else the run id's."""
    if trace_context:
        with EXTRACT:
            kept = propagate.extract(dict(trace_context))
            if trace.get_current_span(kept).get_span_context().is_valid:
                return kept
    return trace.set_span_in_context(NonRecordingSpan(run_span_context(run_id)))


def run_span_context(run_id: UUID) -> SpanContext:
    """A remote parent made from the run's id, the same in every process (never exported)."""
    span_id = uuid5(run_id, RUN_SPAN).int & 0xFFFF_FFFF_FFFF_FFFF
    return SpanContext(
        trace_id=run_id.int or 1,
        span_id=span_id or 1,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )


@dataclass
class Start:
    """Where a new run begins in a trace: the context to keep, and the span that made it."""

    trace_context: dict[str, str]
    own: Opened | None = None

    def describe(self, attributes: Attributes, *, replayed: bool = False) -> None:
        """Name the run on the start's own span; ``replayed``: answered by an earlier start."""
        if self.own is not None:
            self.own.describe({**(attributes or {}), **({REPLAYED: True} if replayed else {})})


@contextmanager
def starting(
    span_name: str, repeated: Callable[[], bool], *, sealed: bool = False
) -> Iterator[Start]:
    """The trace context for a run started in the block: the span's, else one of its own."""
    if in_a_span():
        yield Start(current_trace_context())
        return
    tracer = active_tracer()
    if tracer is None or repeated():
        yield Start({})
        return
    with Opened(tracer, span_name, None, sealed=sealed) as own:
        yield Start(current_trace_context(), own)
