"""Metrics through OpenTelemetry's API: what steps and effects do, and what the read models say.

Counters and the step histogram are recorded in every process; the gauges describe the whole
store, so the application registers them once (:func:`observe`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, CallbackT, MeterProvider, Observation

from actae.adapters.telemetry.guard import GAUGE, PROVIDER
from actae.adapters.telemetry.names import (
    EFFECT_ATTEMPTS,
    EFFECT_RETRIES,
    EFFECTS_IN_DOUBT,
    PROJECTION_LAG,
    RUNS,
    SCOPE,
    SCOPE_VERSION,
    STATUS,
    STEP_DURATION,
    STEPS,
)
from actae.domain.values import RunStatus


class Observed(Protocol):
    """What the gauges read of a store (``Store`` is one); telemetry imports no runtime."""

    def projector(self) -> Any:
        """The store's projector: ``.db.query(statement)`` and ``.lag()``."""
        ...


# A replayed step takes a millisecond, a model call minutes (the SDK's defaults are ms).
STEP_SECONDS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)

RUNS_BY_STATUS = "SELECT status, count(*) AS n FROM run_status GROUP BY status"
IN_DOUBT_COUNT = "SELECT count(*) AS n FROM effects WHERE in_doubt"


@dataclass(frozen=True)
class Instruments:
    """The instruments recorded on the step path, made once per meter provider."""

    steps: metrics.Counter
    step_duration: metrics.Histogram
    effect_attempts: metrics.Counter
    effect_retries: metrics.Counter


_made: tuple[MeterProvider, Instruments] | None = None


def instruments() -> Instruments:
    """The instruments of the meter provider in force now (made again when it changes)."""
    global _made  # noqa: PLW0603 - one set per process-wide provider
    provider = metrics.get_meter_provider()
    if _made is None or _made[0] is not provider:
        made = None
        with PROVIDER:  # the API's no-op instruments when the provider fails to make them
            made = _instruments_of(provider.get_meter(SCOPE, SCOPE_VERSION))
        _made = provider, made or _instruments_of(metrics.NoOpMeter(SCOPE, SCOPE_VERSION))
    return _made[1]


def _instruments_of(meter: metrics.Meter) -> Instruments:
    counter = meter.create_counter
    return Instruments(
        steps=counter(STEPS, "{step}", "Workflow steps, executed or replayed"),
        step_duration=meter.create_histogram(
            STEP_DURATION,
            unit="s",
            description="How long a workflow step took, its recording included",
            explicit_bucket_boundaries_advisory=STEP_SECONDS,
        ),
        effect_attempts=counter(EFFECT_ATTEMPTS, "{attempt}", "Claims granted to run an effect"),
        effect_retries=counter(
            EFFECT_RETRIES,
            "{attempt}",
            "Attempts of an effect after its first (a failure or a doubt before)",
        ),
    )


class Observing(AbstractContextManager["Observing"]):
    """The gauges of :func:`observe`, reporting until :meth:`stop`; stop before the store closes."""

    def __init__(self) -> None:
        self.stopped = False

    def stop(self) -> None:
        """Report nothing from now on."""
        self.stopped = True

    def __exit__(self, *_: object) -> None:
        self.stop()


def observe(store: Observed, *, meter_provider: MeterProvider | None = None) -> Observing:
    """Report the store's runs by status, its effects in doubt and the read models' lag.

    Call once per store, in one process. A gauge that cannot be read reports nothing that time.
    """
    observing = Observing()

    def gauge(read: Callable[[], list[Observation]]) -> CallbackT:
        def reading(_: CallbackOptions) -> Iterable[Observation]:
            with GAUGE:
                return [] if observing.stopped else read()
            return []

        return reading

    def runs() -> list[Observation]:
        rows = store.projector().db.query(RUNS_BY_STATUS)
        counted = {row["status"]: row["n"] for row in rows}
        return [Observation(int(counted.get(s.value, 0)), {STATUS: s.value}) for s in RunStatus]

    def in_doubt() -> list[Observation]:
        (row,) = store.projector().db.query(IN_DOUBT_COUNT)
        return [Observation(int(row["n"]))]

    def lag() -> list[Observation]:
        return [Observation(store.projector().lag())]

    gauges = (
        (RUNS, runs, "{run}", "Runs by status, from run_status"),
        (EFFECTS_IN_DOUBT, in_doubt, "{effect}", "Effects that may have happened unrecorded"),
        (PROJECTION_LAG, lag, "{event}", "Events stored that the read models do not reflect yet"),
    )
    with PROVIDER:
        meter = (meter_provider or metrics.get_meter_provider()).get_meter(SCOPE, SCOPE_VERSION)
        for name, read, unit, description in gauges:
            meter.create_observable_gauge(name, [gauge(read)], unit, description)
    return observing
