"""Telemetry never changes what a run does: every OpenTelemetry call Actae makes is guarded.

OpenTelemetry's SDK lets an exception from a span processor, a propagator, an exemplar
filter or a view reach the caller, and the caller here is a workflow's step. Each call into
OpenTelemetry (starting and ending a span, attaching its context, setting its attributes,
injecting and extracting a trace context, recording a metric, reading a gauge) runs in a
``with`` block of one of the guards below: an exception leaving it is swallowed, the call is
left out (no span, no attribute, no measurement) and the first failure of each kind is
logged, once, as a warning on the ``actae.telemetry`` logger.

A guard is a plain object with ``__enter__``/``__exit__``, not a generator: the step path goes
through a few of them even with no SDK configured.
"""

from __future__ import annotations

import logging
from types import TracebackType

log = logging.getLogger("actae.telemetry")

_failed: set[str] = set()
"""The kinds of call that failed and were reported already (a race may report one twice)."""


class Guard:
    """``with guard:`` around a call into OpenTelemetry: an exception leaving it is dropped."""

    __slots__ = ("kind",)

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        if not isinstance(error, Exception):  # nothing raised, or an interrupt: let it go on
            return False
        if self.kind not in _failed:
            _failed.add(self.kind)
            log.warning(
                "telemetry: %s failed (%s: %s); it is left out and the run goes on as if "
                "untraced (later failures of this kind are not logged)",
                self.kind,
                type(error).__name__,
                error,
                exc_info=error,
            )
        return True


PROVIDER = Guard("looking up a tracer or a meter")
SPAN_START = Guard("starting a span")
SPAN_CONTEXT = Guard("making a span current")
SPAN_ATTRIBUTES = Guard("setting a span's attributes")
SPAN_ERROR = Guard("recording an exception on a span")
SPAN_END = Guard("ending a span")
INJECT = Guard("injecting a trace context")
EXTRACT = Guard("extracting a trace context")
METRIC = Guard("recording a metric")
GAUGE = Guard("reading a gauge")
