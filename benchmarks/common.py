"""What every benchmark shares: the workload, the database, timing helpers, progress, clean-up."""

from __future__ import annotations

import json
import os
import platform
import random
import re
import statistics
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

DSN = "postgresql://postgres@127.0.0.1:5432/test"
QUICK_RUN = os.environ.get("ACTAE_BENCH_QUICK") == "1"
"""``ACTAE_BENCH_QUICK=1 make bench``: every benchmark with small counts, to check that the
pipeline runs end to end (a few minutes); its figures mean nothing and go to
``benchmarks/results/quick/``, so they never mix with a real run's."""
RESULTS = Path(__file__).with_name("results") / ("quick" if QUICK_RUN else "")


def stamp() -> dict[str, str]:
    """When and where a benchmark ran: the head of every results file."""
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": (
            f"{platform.node()} {platform.machine()}, {os.cpu_count()} cores, "
            f"Python {platform.python_version()}"
        ),
    }


def save(name: str, results: dict[str, Any]) -> None:
    """Write ``benchmarks/results/<name>.json``."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(results, indent=2))


README = Path(__file__).resolve().parent.parent / "README.md"
PERFORMANCE = README.parent / "docs" / "performance.md"
"""Where the figures of the benchmarks run on their own go (the month's table)."""


def update_readme(block: str, text: str, path: Path = README) -> None:
    """Replace what ``path`` holds between ``<!-- {block}:start -->`` and its end marker."""
    start, end = f"<!-- {block}:start -->", f"<!-- {block}:end -->"
    page = path.read_text()
    if start not in page or end not in page:
        raise SystemExit(f"{path.name} has no {start} … {end} block")
    new = f"{start}\n{text}\n{end}"
    path.write_text(
        re.sub(f"{re.escape(start)}.*?{re.escape(end)}", lambda _: new, page, flags=re.S)
    )
    print(f"\n{path.name} updated ({start} … {end}).")


def progress(text: str) -> None:
    """One line of progress, so a long run shows where it is."""
    print(f"  … {text}", flush=True)


def with_schema(dsn: str, schema: str) -> str:
    """An Actae store URL for ``schema`` on the server at ``dsn``."""
    return f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}"


def drop_schemas(dsn: str, *schemas: str) -> None:
    """Drop benchmark schemas (and everything in them) if they exist."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for name in schemas:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@contextmanager
def scratch_schema(dsn: str, prefix: str) -> Iterator[str]:
    """A fresh schema name (``prefix_…``), dropped with everything in it afterwards."""
    schema = f"{prefix}_{uuid.uuid4().hex[:8]}"
    try:
        yield schema
    finally:
        drop_schemas(dsn, schema)


def schema_bytes(dsn: str, schema: str) -> int:
    """Bytes on disk of every table in ``schema``, with its indexes and TOAST data."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind = 'r'",
            (schema,),
        ).fetchone()
    return int(row[0]) if row else 0


# ~2 KB of state (docs/performance.md): hex digits, so that neither store can shrink it to
# nothing by compression (a run of one letter would compress to a few bytes in TOAST).
STATE = {"notes": random.Random(7).randbytes(950).hex(), "step": 0}  # noqa: S311 - filler


def rate(run_one: Callable[[int], None], workers: int, per_worker: int) -> float:
    """Operations per second of ``workers`` threads each running ``run_one(index)``."""
    threads = [threading.Thread(target=run_one, args=(i,)) for i in range(workers)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return workers * per_worker / (time.perf_counter() - start)


def timings_ms(call: Callable[[int], object], numbers: Iterable[int]) -> list[float]:
    """How long each ``call(n)`` took, in milliseconds, for each ``n`` in turn."""
    timings = []
    for n in numbers:
        start = time.perf_counter()
        call(n)
        timings.append((time.perf_counter() - start) * 1000)
    return timings


LATENCY_SAMPLES = 300


def latency(call: Callable[[], object], samples: int = LATENCY_SAMPLES) -> dict[str, float]:
    """p50 and p99 in milliseconds."""
    timings = []
    for _ in range(samples):
        start = time.perf_counter()
        call()
        timings.append((time.perf_counter() - start) * 1000)
    return summary(timings)


def summary(timings_ms: list[float]) -> dict[str, float]:
    ordered = sorted(timings_ms)
    return {
        "p50_ms": statistics.median(ordered),
        "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
    }


def medians(rounds: list[Any]) -> Any:
    """Each figure's median over the rounds (nested dicts of numbers, one per round)."""
    first = rounds[0]
    if isinstance(first, dict):
        return {key: medians([r[key] for r in rounds]) for key in first}
    return statistics.median(rounds)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def lag(seconds: list[float]) -> dict[str, float]:
    """p50 and p99 of lags, in milliseconds (NaN when nothing arrived)."""
    if not seconds:
        return {"p50": float("nan"), "p99": float("nan")}
    return {"p50": percentile(seconds, 0.5) * 1000, "p99": percentile(seconds, 0.99) * 1000}


Key = tuple[uuid.UUID, int]
"""(channel, cursor) of one written event."""


WARM_UP = 0.5
"""Seconds of a live run's writes whose lag is not counted in its p50/p99 (see ``live_lags``)."""


def lags_ms(written: dict[Key, float], seen: dict[Key, float]) -> list[float]:
    """Lag of every written event that was seen, from its write returning to being seen.

    Matched after the run, so an event seen before its writer's call had even returned (a
    follower can be that fast) counts as lag 0 instead of being dropped.
    """
    return [max(0.0, seen[key] - at) for key, at in written.items() if key in seen]


def live_lags(written: dict[Key, float], seen: dict[Key, float]) -> dict[str, float]:
    """p50/p99 of the lag at the steady rate, and the lag of the run's first event.

    A follower that polls with a backoff has backed off while the store was quiet before
    the run, so the first events are found up to its current wait late (at most its
    ``poll_interval``): that is the wake-up after idle, reported as ``first``, not the lag
    at the rate. The writes of the first ``WARM_UP`` seconds are left out of p50/p99, on
    every side alike (a ``LISTEN`` follower has nothing to come down from).
    """
    if not written:
        return {**lag([]), "first": float("nan")}
    begun = min(written.values())
    steady = {key: at for key, at in written.items() if at >= begun + WARM_UP}
    first = min(written, key=written.__getitem__)
    figures = lag(lags_ms(steady, seen))
    seen_at = seen.get(first)
    late = float("nan") if seen_at is None else max(0.0, seen_at - written[first])
    figures["first"] = late * 1000
    return figures
