"""``GET /metrics``: the store in Prometheus' text format, read from the read models at each scrape.

``actae_runs``, ``actae_effects_in_doubt`` and ``actae_projection_lag`` mean what the
OpenTelemetry gauges of those names mean; the counters total the whole store, not a process,
so ``actae_steps_done`` (recorded step results) is not ``actae.steps`` (replays too).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from fastapi import APIRouter, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from actae.adapters.console.guards import Viewer
from actae.adapters.console.state import Console
from actae.adapters.operate import views

router = APIRouter()


class StoreCollector(Collector):
    """Reads the console's store at each scrape."""

    def __init__(self, console: Console) -> None:
        self._console = console

    def collect(self) -> Iterator[Metric]:
        """The metrics, as the read models have them now."""
        store = self._console.store
        totals = views.totals(store)
        sums = totals.sums
        gauge, counter = GaugeMetricFamily, CounterMetricFamily
        yield _by("status", "actae_runs", "Runs by status, from run_status", totals.runs)
        yield _by(
            "status", "actae_effects", "Ledger effects by status, from effects", totals.effects
        )
        yield gauge(
            "actae_effects_in_doubt",
            "Effects that may have happened unrecorded (claimed, lease run out or unanswered)",
            value=totals.in_doubt,
        )
        yield counter(
            "actae_effect_attempts", "Effect attempts (claims) made", value=totals.attempts
        )
        yield counter(
            "actae_effect_retries",
            "Effect attempts beyond each effect's first",
            value=totals.retries,
        )
        yield counter(
            "actae_steps_done",
            "Workflow steps whose result was recorded (run_status.steps_done; replays not counted)",
            value=sums["steps_done"],
        )
        tokens = {"input": sums["input_tokens"], "output": sums["output_tokens"]}
        yield _by("type", "actae_tokens", "Model tokens used", tokens, counter)
        yield counter("actae_cost", "Model cost recorded by steps", value=sums["cost"])
        yield gauge(
            "actae_projection_lag",
            "Events stored that the read models do not reflect yet",
            value=store.projector().lag(),
        )
        yield gauge(
            "actae_console_streams",
            "Event streams the console has open",
            value=self._console.streams,
        )


def _by(
    label: str,
    name: str,
    documentation: str,
    values: Mapping[str, float],
    family: type[GaugeMetricFamily | CounterMetricFamily] = GaugeMetricFamily,
) -> Metric:
    metric = family(name, documentation, labels=[label])
    for key, value in values.items():
        metric.add_metric([key], value)
    return metric


def registry_for(console: Console) -> CollectorRegistry:
    """A registry of the console's metrics only (not the process's default ones)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StoreCollector(console))
    return registry


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
def metrics(request: Request, user: Viewer) -> Response:
    """The store's metrics in Prometheus' text format."""
    registry: CollectorRegistry = request.app.state.metrics
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
