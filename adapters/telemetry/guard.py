"""Telemetry never changes what a run does: every OpenTelemetry call Actae makes is guarded.

The SDK lets a processor's exception reach the caller, a workflow's step: a guard swallows
it and logs the first failure of each kind once.
"""

from __future__ import annotations

import logging
from types import TracebackType

log = logging.getLogger("actae.telemetry")

_failed: set[str] = set()  # kinds reported already (a race may report one twice)


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
