"""Metrics through OpenTelemetry's API: what steps and effects do, and what the read models say.

Counters and the step-latency histogram are recorded as workflows run, in any process that
runs them (``runs.RunTrace`` records them beside the spans of the same calls). The gauges
(runs by status, effects in doubt, projection lag) describe the whole store, so they are
registered once by the application (:func:`observe`) in the one process that should report
them, and read from the read models whenever the SDK collects. Every call into OpenTelemetry
(and every gauge's reading) is guarded (:mod:`.guard`): a failing SDK or read leaves a
measurement out and changes nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, Self

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


class ReadModels(Protocol):
    """The read models' statements (the projector's database)."""

    def query(self, statement: str, params: Any = None) -> list[dict[str, Any]]:
        """The rows of one statement."""
        ...


class Projecting(Protocol):
    """A store's projector: its read models, and how far behind the log they are."""

    @property
    def db(self) -> ReadModels:
        """The read models it writes."""
        ...

    def lag(self) -> int:
        """Events stored after its position."""
        ...


class Observed(Protocol):
    """What the gauges read of a store (``Store`` is one); telemetry imports no runtime."""

    def projector(self) -> Projecting:
        """The store's projector."""
        ...


STEP_SECONDS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
"""Bucket bounds of the step-latency histogram: a replayed step takes a millisecond, a model
call seconds to minutes (the SDK's default bounds are meant for milliseconds)."""

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
    """The instruments of the meter provider in force now.

    Made again only when the global provider changes (once: from the API's proxy to the
    application's SDK), since every instrument made also stays registered with its meter.
    """
    global _made  # noqa: PLW0603 - one set per process-wide provider
    provider = metrics.get_meter_provider()
    made = _made
    if made is None or made[0] is not provider:
        made = _made = provider, _instruments_for(provider)
    return made[1]


def _instruments_for(provider: MeterProvider) -> Instruments:
    """The provider's instruments; the API's no-op ones when it fails to make them."""
    with PROVIDER:
        return _instruments_of(provider.get_meter(SCOPE, SCOPE_VERSION))
    return _instruments_of(metrics.NoOpMeter(SCOPE, SCOPE_VERSION))


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


class Observing:
    """The store-wide gauges of :func:`observe`, reporting until :meth:`stop`.

    As a context manager it stops at the end of the block: ``with actae.open(url) as store,
    observe(store):`` stops reporting before the store closes, so no collection after that
    tries to read a closed store (OpenTelemetry cannot take an instrument back).
    """

    def __init__(self) -> None:
        self.stopped = False

    def stop(self) -> None:
        """Report nothing from now on."""
        self.stopped = True

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


def observe(store: Observed, *, meter_provider: MeterProvider | None = None) -> Observing:
    """Report the store's runs by status, its effects in doubt and the read models' lag.

    Call once per store, in one process (a worker, the console): the gauges are read from
    the read models at each collection, so they are as fresh as the projector (``actae
    project`` or the workers keep it current), and the lag says how fresh that is.
    ``meter_provider`` defaults to the global one. Stop it before closing the store. A gauge
    that cannot be read (the database is down) reports nothing at that collection; a failure
    is logged once on the ``actae.telemetry`` logger.
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

    gauges = (
        (RUNS, runs, "{run}", "Runs by status, from run_status"),
        (
            EFFECTS_IN_DOUBT,
            in_doubt,
            "{effect}",
            "Effects that may have happened unrecorded, from the effects read model",
        ),
        (
            PROJECTION_LAG,
            lambda: [Observation(store.projector().lag())],
            "{event}",
            "Events stored that the read models do not reflect yet",
        ),
    )
    with PROVIDER:
        meter = (meter_provider or metrics.get_meter_provider()).get_meter(SCOPE, SCOPE_VERSION)
        for name, read, unit, description in gauges:
            meter.create_observable_gauge(name, [gauge(read)], unit, description)
    return observing
