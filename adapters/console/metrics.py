"""``GET /metrics``: the store in Prometheus' text format, read from the read models.

A custom collector reads the read models at each scrape (they are kept live by the
console's projector): runs by status, effects by status and in doubt, effect attempts and
retries, steps done, tokens and cost (where this Actae's run_status has those columns), how
many events the read models lag behind the store, and the console's open event streams.

Three are the gauges ``observe(store)`` reports through OpenTelemetry (docs/telemetry.md),
read with the same meaning and named as those take their names in Prometheus:
``actae_runs``, ``actae_effects_in_doubt`` and ``actae_projection_lag`` (OpenTelemetry labels
the run status ``actae_status``, this one ``status``). The counters are totals over the whole
store, not the per-process counters the workers record, and ``actae_steps_done`` counts
recorded step results (run_status.steps_done), not ``actae.steps`` (which counts replayed
steps too): so its name differs.

Scrapes need credentials like any other read: a viewer's bearer token
(``authorization: {credentials_file: ...}`` in Prometheus' scrape config).
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
from actae.adapters.operate import overview

router = APIRouter()

TOKEN_TYPES = {"input_tokens": "input", "output_tokens": "output"}
"""run_status's token columns, by the ``type`` label they are reported with."""


class StoreCollector(Collector):
    """Reads the console's store at each scrape."""

    def __init__(self, console: Console) -> None:
        self._console = console

    def collect(self) -> Iterator[Metric]:
        """The metrics, as the read models have them now."""
        store = self._console.store
        totals = overview.totals(store)
        yield _by_status("actae_runs", "Runs by status, from run_status", totals.runs)
        yield _by_status("actae_effects", "Ledger effects by status, from effects", totals.effects)
        yield GaugeMetricFamily(
            "actae_effects_in_doubt",
            "Effects that may have happened unrecorded (claimed, lease run out or unanswered)",
            value=totals.in_doubt,
        )
        yield CounterMetricFamily(
            "actae_effect_attempts", "Effect attempts (claims) made", value=totals.attempts
        )
        yield CounterMetricFamily(
            "actae_effect_retries",
            "Effect attempts beyond each effect's first",
            value=totals.retries,
        )
        if "steps_done" in totals.sums:
            yield CounterMetricFamily(
                "actae_steps_done",
                "Workflow steps whose result was recorded (run_status.steps_done; replays not "
                "counted)",
                value=totals.sums["steps_done"],
            )
        tokens = CounterMetricFamily("actae_tokens", "Model tokens used", labels=["type"])
        for column, kind in TOKEN_TYPES.items():
            if column in totals.sums:
                tokens.add_metric([kind], totals.sums[column])
        if tokens.samples:
            yield tokens
        if "cost" in totals.sums:
            yield CounterMetricFamily(
                "actae_cost", "Model cost recorded by steps", value=totals.sums["cost"]
            )
        yield GaugeMetricFamily(
            "actae_projection_lag",
            "Events stored that the read models do not reflect yet",
            value=store.projector().lag(),
        )
        yield GaugeMetricFamily(
            "actae_console_streams",
            "Event streams the console has open",
            value=self._console.streams,
        )


def _by_status(name: str, documentation: str, counts: Mapping[str, int]) -> Metric:
    family = GaugeMetricFamily(name, documentation, labels=["status"])
    for status, count in counts.items():
        family.add_metric([status], count)
    return family


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
