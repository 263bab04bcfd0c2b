"""Spans through OpenTelemetry's API, and the trace context a run keeps to stay one trace.

Actae depends on the API only. Until the application configures an SDK the global tracer
provider is the API's own, which records nothing: then no span is even opened, so the step
path costs what it cost before tracing existed. The provider is looked up when a run's
context is made and at each start, never once at import, so a provider set by an
application (or a test) after importing Actae is the one that gets the spans.

A run is one trace however many workers take it: ``start_run`` records where it started
(the current span, or a short ``actae.start`` span of its own) as propagation headers (W3C
``traceparent``), and every later span of the run is opened under that context
(:func:`parent_context`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import Self

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import INVALID_SPAN, Span, Status, StatusCode
from opentelemetry.util.types import Attributes

from actae.adapters.telemetry.names import SCOPE, SCOPE_VERSION
from actae.domain.errors import RunSuspended
from actae.domain.validation import MAX_TEXT_LENGTH

NOT_KEPT = frozenset({"baggage"})
"""Propagated headers a run does not keep: baggage is the caller's data, not the trace's, and
the event log keeps what it is given forever."""

API_PROVIDERS = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
"""The API's own tracer providers: in force until an SDK is configured, they record nothing."""


def active_tracer() -> trace.Tracer | None:
    """Actae's tracer from the provider in force now; None while none can record anything."""
    provider = trace.get_tracer_provider()
    if isinstance(provider, API_PROVIDERS):
        return None
    return provider.get_tracer(SCOPE, SCOPE_VERSION)


def span_name(prefix: str, name: object) -> str:
    """``"{prefix} {name}"``; the prefix alone for a name the call is about to refuse."""
    if isinstance(name, str) and 0 < len(name) <= MAX_TEXT_LENGTH:
        return f"{prefix} {name}"
    return prefix


class Opened:
    """A span, current while the ``with`` block runs (none at all without a ``tracer``).

    An exception leaving the block marks the span failed (:func:`failed`) and goes on.
    """

    def __init__(
        self,
        tracer: trace.Tracer | None,
        name: str,
        attributes: Attributes,
        parent: Context | None = None,
    ) -> None:
        self._tracer = tracer
        self._name = name
        self._attributes = attributes
        self._parent = parent
        self.span: Span = INVALID_SPAN
        self.recording = False
        self._token: object = None

    def __enter__(self) -> Self:
        if self._tracer is not None:
            opened = self._tracer.start_span(
                self._name, context=self._parent, attributes=self._attributes
            )
            self._token = otel_context.attach(trace.set_span_in_context(opened))
            self.span, self.recording = opened, opened.is_recording()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._tracer is None:
            return
        if isinstance(error, Exception):
            failed(self.span, error)
        otel_context.detach(self._token)  # type: ignore[arg-type]
        self.span.end()


def failed(target: Span, error: BaseException) -> None:
    """Record ``error`` on ``target`` and set its status to ERROR.

    A ``RunSuspended`` is how a workflow says it waits: it is no failure of anything.
    """
    if isinstance(error, RunSuspended) or not target.is_recording():
        return
    target.record_exception(error)
    target.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))


def failed_here(error: BaseException) -> None:
    """:func:`failed` on the current span."""
    failed(trace.get_current_span(), error)


def in_a_span() -> bool:
    """Whether a (valid) span is current: its context is where new work belongs."""
    return trace.get_current_span().get_span_context().is_valid


def current_trace_context() -> dict[str, str]:
    """The current context as the propagator's headers (W3C ``traceparent``, ...), to keep."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    for header in NOT_KEPT:
        carrier.pop(header, None)
    return carrier


def parent_context(trace_context: Mapping[str, str]) -> Context | None:
    """The context kept as ``trace_context``, to open spans under; None when none was kept."""
    if not trace_context:
        return None
    return propagate.extract(dict(trace_context))


@dataclass
class Start:
    """Where a new run begins in a trace: the context to keep, and the span that made it."""

    trace_context: dict[str, str]
    own_span: Span | None = None

    def describe(self, attributes: Attributes) -> None:
        """Name the run on the start's own span (an enclosing span is the caller's)."""
        if self.own_span is not None and self.own_span.is_recording() and attributes:
            self.own_span.set_attributes(attributes)


@contextmanager
def starting(span_name: str) -> Iterator[Start]:
    """The trace context for a run started in the block.

    Inside a span, that span's context; otherwise a short span named ``span_name`` of its
    own, so that a run started by a plain script still has a trace to join when tracing is
    configured. Without an SDK the context is empty, and nothing is recorded.
    """
    if in_a_span():
        yield Start(current_trace_context())
        return
    tracer = active_tracer()
    if tracer is None:
        yield Start({})
        return
    with Opened(tracer, span_name, None) as own:
        yield Start(current_trace_context(), own.span)
