"""A worker process that exports every span it ends, as a JSON line, to a file.

``python traced_worker.py URL NAME SPANS MARKER``: configures OpenTelemetry's SDK the way an
application would, before any run is taken, then works until SIGTERM. Its workflow
``sampler`` takes two samples, then waits forever in its last step the first time (after
writing MARKER), so the test can SIGKILL the process at a known point.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

import actae


class JsonLines(SpanExporter):
    """Appends each finished span to a file at once: a SIGKILL loses only unfinished spans."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self.path.open("a") as out:
            for span in spans:
                out.write(json.dumps(as_dict(span)) + "\n")
        return SpanExportResult.SUCCESS


def as_dict(span: ReadableSpan) -> dict[str, Any]:
    assert span.context is not None
    return {
        "name": span.name,
        "trace_id": f"{span.context.trace_id:032x}",
        "span_id": f"{span.context.span_id:016x}",
        "parent_id": None if span.parent is None else f"{span.parent.span_id:016x}",
        "attributes": dict(span.attributes or {}),
    }


def hang_the_first_time(marker: Path) -> str:
    if not marker.exists():
        marker.write_text(str(os.getpid()))
        signal.pause()  # killed here by the test
    return "finished"


def main(url: str, name: str, spans: Path, marker: Path) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonLines(spans)))
    trace.set_tracer_provider(provider)

    registry = actae.Registry()

    @registry.workflow("sampler")
    def sampler(ctx: actae.RunContext) -> dict[str, Any]:
        first = ctx.step("first", random.random)
        second = ctx.step("second", random.random)
        last = ctx.step("last", lambda: hang_the_first_time(marker))
        return {"first": first, "second": second, "last": last}

    with actae.open(url) as store:
        worker = actae.Worker(store, name=name, registry=registry, lease=2, poll_interval=0.05)

        def stop(signum: int, frame: FrameType | None) -> None:
            worker.request_stop()

        signal.signal(signal.SIGTERM, stop)
        worker.run()
    provider.shutdown()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4]))
