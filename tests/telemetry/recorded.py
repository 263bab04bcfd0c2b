"""Reading what the SDK recorded: spans by name and parent, metric points by attributes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext


class Spans:
    """The spans ended so far, oldest first."""

    def __init__(self, exporter: InMemorySpanExporter) -> None:
        self._exporter = exporter

    def all(self) -> list[ReadableSpan]:
        return list(self._exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.all() if span.name == name]

    def one(self, name: str) -> ReadableSpan:
        (found,) = self.named(name)
        return found

    def children(self, parent: ReadableSpan) -> list[ReadableSpan]:
        """The spans whose parent is ``parent`` (here, or in another process), in start order."""
        found = [span for span in self.all() if is_child(span, parent)]
        return sorted(found, key=lambda span: span.start_time or 0)

    def names_under(self, parent: ReadableSpan) -> list[str]:
        return [span.name for span in self.children(parent)]


def is_child(span: ReadableSpan, parent: ReadableSpan) -> bool:
    """Whether ``parent`` is ``span``'s parent (a remote parent's context says it is remote)."""
    mine, theirs = span.parent, context_of(parent)
    return mine is not None and (mine.trace_id, mine.span_id) == (theirs.trace_id, theirs.span_id)


def context_of(span: ReadableSpan) -> SpanContext:
    context = span.context
    assert isinstance(context, SpanContext)
    return context


def traceparent_of(span: ReadableSpan) -> str:
    """The W3C ``traceparent`` header naming ``span``."""
    context = context_of(span)
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def points(reader: InMemoryMetricReader, name: str, where: Mapping[str, object]) -> list[Any]:
    """The data points of instrument ``name`` whose attributes include ``where``."""
    found = []
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name != name:
                    continue
                for point in metric.data.data_points:
                    if _includes(point.attributes or {}, where):
                        found.append(point)
    return found


def _includes(attributes: Mapping[str, object], where: Mapping[str, object]) -> bool:
    return all(attributes.get(key) == value for key, value in where.items())


def unit_of(reader: InMemoryMetricReader, name: str) -> str:
    """The unit instrument ``name`` reports in."""
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == name:
                    return metric.unit or ""
    raise AssertionError(f"no instrument {name!r} reported")
