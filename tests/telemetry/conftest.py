"""OpenTelemetry's SDK for the telemetry tests: one tracer and one meter provider per process.

OpenTelemetry's global providers can be set only once in a process. The tracer provider set
here hands out the SDK's tracer while a test holds the ``spans`` fixture and the API's no-op
tracer otherwise, so the rest of a whole-suite run traces nothing and keeps no spans. A test
can turn it off for a while (``switch.on = False``) or trace with an SDK of its own
(``traced_by``). Each test starts with the telemetry guards' warnings unsaid.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from actae.adapters.telemetry import guard
from tests.telemetry.recorded import Spans


class Switched(trace.TracerProvider):
    """The SDK's tracers while ``on``, the API's no-op tracer otherwise."""

    def __init__(self, sdk: TracerProvider) -> None:
        self.sdk = sdk
        self.on = False

    def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
        return self.sdk.get_tracer(*args, **kwargs) if self.on else trace.NoOpTracer()


_EXPORTER = InMemorySpanExporter()
_READER = InMemoryMetricReader()


@pytest.fixture(scope="session")
def _switched() -> Switched:
    sdk = TracerProvider()
    sdk.add_span_processor(SimpleSpanProcessor(_EXPORTER))
    switched = Switched(sdk)
    meter_provider = MeterProvider(metric_readers=[_READER])
    trace.set_tracer_provider(switched)
    metrics.set_meter_provider(meter_provider)
    if trace.get_tracer_provider() is not switched:
        pytest.fail("another test set OpenTelemetry's global tracer provider first")
    if metrics.get_meter_provider() is not meter_provider:
        pytest.fail("another test set OpenTelemetry's global meter provider first")
    return switched


@pytest.fixture
def spans(_switched: Switched) -> Iterator[Spans]:
    """The spans ended during the test (an SDK is configured only while a test has this)."""
    _EXPORTER.clear()
    _switched.on = True
    try:
        yield Spans(_EXPORTER)
    finally:
        _switched.on = False
        _EXPORTER.clear()


@pytest.fixture
def switch(_switched: Switched) -> Switched:
    """The global tracer provider: ``switch.on = False`` traces nothing for a while."""
    return _switched


@pytest.fixture
def traced_by(spans: Spans, _switched: Switched) -> Iterator[Callable[[TracerProvider], None]]:
    """Trace with a tracer provider of the test's own (a failing one, say) from the call on."""
    configured = _switched.sdk

    def use(provider: TracerProvider) -> None:
        _switched.sdk = provider

    try:
        yield use
    finally:
        _switched.sdk = configured


@pytest.fixture(autouse=True)
def _unsaid(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every guard may warn again: a test sees the first failure of each kind it causes."""
    monkeypatch.setattr(guard, "_failed", set())


@pytest.fixture
def metric_reader(_switched: Switched) -> InMemoryMetricReader:
    """The global meter provider's reader (cumulative: tell tests apart by their agent ids)."""
    return _READER
