"""Spans through OpenTelemetry's API, and the trace context a run keeps to stay one trace.

Actae depends on the API only. Until the application configures an SDK the global tracer
provider is the API's own, which records nothing: then no span is even opened, so the step
path costs what it cost before tracing existed. The provider is looked up when a run's
context is made and at each start, never once at import, so a provider set by an
application (or a test) after importing Actae is the one that gets the spans.

A run is one trace however many workers take it: ``start_run`` records where it started
(the current span, or a short ``actae.start`` span of its own) as propagation headers (W3C
``traceparent``), and every later span of the run is opened under that context
(:func:`parent_context`). A run that recorded none (started untraced, or before runs kept
a trace context) is opened under a context made from its id: trace id = the run id.

Every call into OpenTelemetry goes through a guard (:mod:`.guard`): a failing SDK leaves a
span out, never the run's work.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
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

NOT_KEPT = frozenset({"baggage"})
"""Propagated headers a run does not keep: baggage is the caller's data, not the trace's, and
the event log keeps what it is given forever."""

API_PROVIDERS = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
"""The API's own tracer providers: in force until an SDK is configured, they record nothing."""


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


class Opened:
    """A span, current while the ``with`` block runs (none at all without a ``tracer``).

    An exception leaving the block marks the span failed (:func:`failed`) and goes on. A
    span the SDK fails to start is left out: the block runs in no span of its own. A span
    of a ``sealed`` store (of run ``run_id``, when it is about one) names an error by its
    type only (:func:`failed`).
    """

    def __init__(
        self,
        tracer: trace.Tracer | None,
        name: str,
        attributes: Attributes,
        parent: Context | None = None,
        *,
        sealed: bool = False,
        run_id: UUID | None = None,
    ) -> None:
        self._tracer = tracer
        self._sealed = sealed
        self._run_id = run_id
        self._name = name
        self._attributes = attributes
        self._parent = parent
        self.span: Span = INVALID_SPAN
        self.recording = False
        self._opened = False
        self._token: object = None

    def __enter__(self) -> Self:
        if self._tracer is not None:
            with SPAN_START:
                opened = self._tracer.start_span(
                    self._name, context=self._parent, attributes=self._attributes
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
            failed(self.span, error, sealed=self._sealed, run_id=self._run_id)
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
    """Record ``error`` on ``target`` and set its status to ERROR.

    What the status and the exception event say of it is :func:`error_text`'s: on a
    ``sealed`` store (opened with a keyring) its type and where to read it, never its
    message nor a traceback (whose last line is the message): a span outlives ``forget``.
    A ``RunSuspended`` is how a workflow says it waits: it is no failure of anything.
    """
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


EXCEPTION_EVENT = "exception"
"""The event OpenTelemetry's ``record_exception`` adds; a sealed store's carries the type only."""


def _type_name(error: BaseException) -> str:
    """The error's type as ``record_exception`` names it (module-qualified but for builtins)."""
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
    """The current context as the propagator's headers (W3C ``traceparent``, ...), to keep.

    Empty when the propagator fails: the run then keeps no context (:func:`parent_context`).
    """
    with INJECT:
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        for header in NOT_KEPT:
            carrier.pop(header, None)
        return carrier
    return {}


def parent_context(trace_context: Mapping[str, str], run_id: UUID) -> Context:
    """The context to open run ``run_id``'s spans under, when no span of the run is current.

    The one the run kept as ``trace_context``; when it kept none that names a span (started
    untraced, before runs kept one, or the propagator cannot read it now), the context of
    :func:`run_span_context`, so that the run is still one trace.
    """
    if trace_context:
        with EXTRACT:
            kept = propagate.extract(dict(trace_context))
            if trace.get_current_span(kept).get_span_context().is_valid:
                return kept
    return trace.set_span_in_context(NonRecordingSpan(run_span_context(run_id)))


def run_span_context(run_id: UUID) -> SpanContext:
    """A remote parent made from the run's id, the same in every process: its trace is the run's.

    Trace id = the run id's 128 bits (never 0 for a run id: a UUID4 has its version bits set),
    span id = the low 64 bits of ``uuid5(run_id, "actae.run")`` (never 0: they hold the
    variant bits). No span with this id is ever exported: backends show the run's spans as
    children of a parent that does not arrive, all in the one trace.
    """
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
        """Name the run on the start's own span (an enclosing span is the caller's).

        ``replayed``: the start was answered by an earlier one's run, recorded in that one's
        trace (a repeat of the same start that got past the look :func:`starting` takes).
        """
        if self.own is not None:
            self.own.describe({**(attributes or {}), **({REPLAYED: True} if replayed else {})})


def never() -> bool:
    """No start is known to be a repeat before it runs."""
    return False


@contextmanager
def starting(
    span_name: str, repeated: Callable[[], bool] = never, *, sealed: bool = False
) -> Iterator[Start]:
    """The trace context for a run started in the block.

    Inside a span, that span's context; otherwise a short span named ``span_name`` of its
    own (naming a failure by its type alone on a ``sealed`` store), so that a run started by
    a plain script still has a trace to join when tracing is configured, unless
    ``repeated()`` says the start already ran (its repeat keeps the first one's context, so
    a span of its own would be a stray trace). Without an SDK the context is empty, and
    nothing is recorded.
    """
    if in_a_span():
        yield Start(current_trace_context())
        return
    tracer = active_tracer()
    if tracer is None or repeated():
        yield Start({})
        return
    with Opened(tracer, span_name, None, sealed=sealed) as own:
        yield Start(current_trace_context(), own)
