"""Purging finished runs while writers keep writing: the purge's rate, and what writers feel.

Retention deletes a purged run's events a batch of runs per transaction (100,
``adapters/runtime/retention.py``), so that writers are never locked out for long.
This benchmark checks it on PostgreSQL: ``--runs`` finished runs (default 10,000: a start,
two ~2 KB transitions and a completion each, written by four client processes) are aged past
their policy with a :class:`actae.ManualClock`, then purged by ``apply_retention`` calls of
``--limit`` runs (default 1,000) while writer processes transition live runs of the same
store at a steady pace (``--rate``, all writers together; 0: as fast as they go). Phases
alternate: writers alone, writers during the purge, alone, … until every run is purged, so
both see the same moments of a drifting machine. The baseline of every writer
figure is the writers alone, in the same run.

Besides the writers' rate and latency per phase, a sampler process reads
``pg_stat_activity`` every 20 ms and counts what the writers' statements wait on: a writer
locked out by the purge would show waits on a row, tuple or relation lock
(``Lock:transactionid``, ``Lock:tuple``, ``Lock:relation``); ``Lock:advisory`` is the
ordering lock that every insert takes, the purge's tombstones included.

The purge's time is measured at ``--runs`` and projected to 100,000 runs from a fit over the
calls (:class:`Calls`: a call's time grows with the runs purged before it, so the projection
is not linear), in calls of ``--limit`` and of ``apply_retention``'s default; how fast the
runs were created is printed for scale. Run with
``python -m benchmarks.purge [--dsn DSN] [--runs N] [--limit N] [--rate N]``; results go to
``benchmarks/results/purge.json``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import time
import uuid
from collections import Counter
from typing import Any

import psycopg

import actae
from benchmarks.common import (
    DSN,
    STATE,
    drop_schemas,
    percentile,
    progress,
    save,
    stamp,
    with_schema,
)
from benchmarks.core import in_processes

RUNS = 10_000
TARGET = 100_000
CREATORS = 4
STEPS = 2
WRITERS = 2
RATE = 300.0
"""Transitions per second of all writers together (0: as fast as they can)."""
LIMIT = 1_000
"""Runs per ``apply_retention`` call (each deletes them 100 per transaction)."""
DEFAULT_LIMIT = 10_000
"""``apply_retention``'s own default ``limit``."""
PHASE = 3.0
"""Seconds of each phase: writers alone, then writers during the purge."""
SAMPLE_EVERY = 0.02
POLICY = {"completed": "7d", "failed": "30d", "cancelled": "7d"}
AGE = 31 * 86_400
"""Seconds the purging store's clock is moved on: past every policy."""
LOCK_WAITS = ("Lock:transactionid", "Lock:tuple", "Lock:relation")


# -- the finished runs ------------------------------------------------------------------------


def finished_run(store: actae.Store, name: str, steps: int) -> None:
    """A start, ``steps`` transitions of ~2 KB state and a completion."""
    run = store.start_run(name, agent_id="bench", state=STATE)
    receipt: actae.RunInfo | actae.Receipt = run
    for n in range(1, steps + 1):
        receipt = step(store, run.channel_id, n, receipt)
    store.complete_run(run.run_id, {"ok": True})


def step(
    store: actae.Store,
    channel_id: uuid.UUID,
    n: int,
    after: actae.RunInfo | actae.Receipt,
) -> actae.Receipt:
    """The ``n``-th ~2 KB transition of a run, expected right after ``after``."""
    return store.transition(
        channel_id,
        kind="step",
        payload={"n": n},
        state={**STATE, "step": n},
        expected_version=after.state_version,
        expected_cursor=after.cursor,
    )


def create(url: str, runs: int, processes: int, steps: int) -> float:
    """Write ``runs`` finished runs from ``processes`` client processes; runs per second."""
    share = runs // processes

    def job(index: int, ready: Any, out: Any) -> None:
        with actae.open(url) as store:
            ready.wait()
            for i in range(share):
                finished_run(store, f"old-{index}-{i}", steps)
            out.put([])

    per_s, _ = in_processes(job, processes, share)
    return per_s


# -- writers and the sampler, in processes of their own --------------------------------------


def writer(url: str, rate: float, ready: Any, stop: Any, out: Any) -> None:
    """Transition a live run at ``rate`` per second until ``stop``; (start, ms) per write.

    Paced from a schedule: a writer held up writes back to back until it is on time again.
    """
    with actae.open(url) as store:
        run = store.start_run(f"live-{uuid.uuid4()}", agent_id="bench", state=STATE)
        receipt: actae.RunInfo | actae.Receipt = run
        samples: list[tuple[float, float]] = []
        ready.wait()
        next_at = time.monotonic()
        n = 0
        while not stop.is_set():
            if rate:
                time.sleep(max(0.0, next_at - time.monotonic()))  # pacing the load
                next_at += 1 / rate
            n += 1
            start = time.monotonic()
            receipt = step(store, run.channel_id, n, receipt)
            samples.append((start, (time.monotonic() - start) * 1000))
    out.put(("writer", samples))


def sampler(dsn: str, application: str, ready: Any, stop: Any, out: Any) -> None:
    """What the writers' active statements wait on, every ``SAMPLE_EVERY`` seconds."""
    query = (
        "SELECT coalesce(wait_event_type || ':' || wait_event, 'running') "
        "FROM pg_stat_activity WHERE application_name = %s AND state = 'active'"
    )
    samples: list[tuple[float, list[str]]] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        ready.wait()
        while not stop.is_set():
            at = time.monotonic()
            samples.append((at, [row[0] for row in conn.execute(query, (application,))]))
            time.sleep(SAMPLE_EVERY)
    out.put(("sampler", samples))


# -- the purge, in phases ---------------------------------------------------------------------

Phase = tuple[str, float, float]
"""``("alone" | "purge", start, end)`` on ``time.monotonic``, shared by the processes."""


class Calls:
    """``apply_retention`` calls as made: runs purged before each one, by it, and its time.

    Each call first re-checks the runs purged within the last day (a purge a crash cut
    short is finished then; a few queries per 500 runs), so a call's time may grow with
    the runs purged before it, and a backlog's with its square. :meth:`fit` separates the
    two costs; :meth:`projected` adds them up for another number of runs and ``limit``.
    """

    def __init__(self) -> None:
        self.rows: list[tuple[int, int, float]] = []
        self.purged = self.events = self.artifacts = 0
        self.seconds = 0.0

    def call(self, store: actae.Store, limit: int) -> int:
        """One call of up to ``limit`` runs; how many it purged."""
        report = store.apply_retention(actor="bench", limit=limit)
        self.rows.append((self.purged, len(report.purged), report.seconds))
        self.purged += len(report.purged)
        self.events += report.events_deleted
        self.artifacts += report.artifacts_deleted
        self.seconds += report.seconds
        return len(report.purged)

    def fit(self) -> tuple[float, float]:
        """Seconds per run purged, and per run purged earlier, per call (least squares)."""
        nn = sum(n * n for _, n, _ in self.rows)
        rr = sum(r * r for r, _, _ in self.rows)
        nr = sum(n * r for r, n, _ in self.rows)
        nt = sum(n * t for _, n, t in self.rows)
        rt = sum(r * t for r, _, t in self.rows)
        det = nn * rr - nr * nr
        if not det:
            return self.seconds / max(1, self.purged), 0.0
        return (nt * rr - rt * nr) / det, (rt * nn - nt * nr) / det

    def projected(self, runs: int, limit: int) -> float:
        """Seconds to purge ``runs`` in calls of ``limit``, by the fit."""
        per_run, per_earlier = self.fit()
        calls = -(-runs // limit)
        earlier = sum(min(k * limit, runs) for k in range(calls + 1))  # and a last, empty call
        return per_run * runs + per_earlier * earlier

    def figures(self, target: int, limits: tuple[int, ...]) -> dict[str, Any]:
        """Totals, the fit, and the time for ``target`` runs in calls of each of ``limits``."""
        per_run, per_earlier = self.fit()
        return {
            "runs": self.purged,
            "events_deleted": self.events,
            "artifacts_deleted": self.artifacts,
            "calls": len(self.rows),
            "seconds": self.seconds,
            "runs_per_s": self.purged / self.seconds,
            "s_per_run": per_run,
            "s_per_earlier_run_per_call": per_earlier,
            "target_s": {str(limit): self.projected(target, limit) for limit in limits},
            "rows": self.rows,
        }


def purge_in_phases(store: actae.Store, limit: int) -> tuple[list[Phase], Calls]:
    """Alternate writers alone and writers during ``apply_retention`` calls until all is gone."""
    phases: list[Phase] = []
    calls = Calls()
    done = False
    while True:
        start = time.monotonic()
        time.sleep(PHASE)
        phases.append(("alone", start, time.monotonic()))
        if done:
            break
        start = time.monotonic()
        while time.monotonic() - start < PHASE:
            if not calls.call(store, limit):
                done = True
                break
        phases.append(("purge", start, time.monotonic()))
        progress(f"purged {calls.purged:,} runs in {calls.seconds:,.1f} s")
    return phases, calls


def kind_at(phases: list[Phase], at: float) -> str | None:
    for kind, start, end in phases:
        if start <= at < end:
            return kind
    return None


def writer_figures(phases: list[Phase], samples: list[tuple[float, float]]) -> dict[str, Any]:
    """Rate and latency of the writers' transitions started in each kind of phase."""
    out: dict[str, Any] = {}
    for kind in ("alone", "purge"):
        timings = [ms for at, ms in samples if kind_at(phases, at) == kind]
        span = sum(end - start for k, start, end in phases if k == kind)
        out[kind] = {
            "per_s": len(timings) / span,
            "p50_ms": statistics.median(timings),
            "p99_ms": percentile(timings, 0.99),
            "max_ms": max(timings),
            "samples": len(timings),
        }
    return out


def wait_figures(phases: list[Phase], samples: list[tuple[float, list[str]]]) -> dict[str, Any]:
    """Per kind of phase: how often a writer's statement was seen waiting on what."""
    out: dict[str, Any] = {}
    for kind in ("alone", "purge"):
        seen: Counter[str] = Counter()
        for at, waits in samples:
            if kind_at(phases, at) == kind:
                seen.update(waits)
        out[kind] = dict(seen.most_common())
    return out


def measure(dsn: str, runs: int, limit: int, rate: float) -> dict[str, Any]:
    schema = f"bench_purge_{uuid.uuid4().hex[:8]}"
    application = schema + "_writer"
    url = with_schema(dsn, schema)
    try:
        with actae.open(url):
            pass  # creates the schema once; no store is open while processes fork
        progress(f"creating {runs:,} finished runs in {CREATORS} processes")
        started = time.perf_counter()
        created_per_s = create(url, runs, CREATORS, STEPS)
        progress(f"created in {time.perf_counter() - started:,.0f} s")
        context = multiprocessing.get_context("fork")
        ready, stop, out = context.Barrier(WRITERS + 2), context.Event(), context.Queue()
        writer_url = f"{url}&application_name={application}"
        procs = [
            context.Process(target=writer, args=(writer_url, rate / WRITERS, ready, stop, out))
            for _ in range(WRITERS)
        ]
        procs.append(context.Process(target=sampler, args=(dsn, application, ready, stop, out)))
        for proc in procs:
            proc.start()
        clock = actae.ManualClock()
        try:
            with actae.open(url, clock=clock) as store:
                store.set_retention(POLICY, actor="bench")
                clock.advance(AGE)
                progress("projecting the runs (the read models retention looks candidates up in)")
                started = time.perf_counter()
                store.projector().catch_up()
                catch_up = time.perf_counter() - started
                ready.wait()
                time.sleep(1.0)  # the writers' first transitions: connections, caches
                phases, purge = purge_in_phases(store, limit)
        finally:
            stop.set()
        writes: list[tuple[float, float]] = []
        waits: list[tuple[float, list[str]]] = []
        for _ in procs:
            who, samples = out.get(timeout=120)
            (writes if who == "writer" else waits).extend(samples)
        for proc in procs:
            proc.join()
        return {
            "runs": runs,
            "steps": STEPS,
            "limit": limit,
            "rate": rate,
            "created_per_s": created_per_s,
            "catch_up_s": catch_up,
            "purge": purge.figures(TARGET, (limit, DEFAULT_LIMIT)),
            "writers": writer_figures(phases, writes),
            "waits": wait_figures(phases, waits),
        }
    finally:
        drop_schemas(dsn, schema)


# -- report -----------------------------------------------------------------------------------


def locked(waits: dict[str, int]) -> int:
    return sum(count for name, count in waits.items() if name in LOCK_WAITS)


def table(results: dict[str, Any]) -> str:
    purge, writers, waits = results["purge"], results["writers"], results["waits"]
    alone, during = writers["alone"], writers["purge"]
    pace = f"{results['rate']:,.0f}/s in all" if results["rate"] else "unpaced"
    projected = purge["target_s"]
    lines = [
        f"Purged {purge['runs']:,} finished runs ({purge['events_deleted'] / purge['runs']:.1f} "
        f"events deleted per run) in {purge['seconds']:,.1f} s: "
        f"{purge['runs_per_s']:,.0f} runs/s, {purge['events_deleted'] / purge['seconds']:,.0f} "
        f"events/s, in {purge['calls']} apply_retention calls of up to {results['limit']:,} "
        f"runs (the runs were created at {results['created_per_s']:,.0f} runs/s by {CREATORS} "
        f"processes). A call's time: {purge['s_per_run'] * 1000:.2f} ms per run it purges, plus "
        f"{purge['s_per_earlier_run_per_call'] * 1000:.3f} ms per run purged within the last day "
        f"(re-checked by every call), fitted over the calls. {TARGET:,} runs by that fit: "
        + ", ".join(
            f"{seconds / 60:,.1f} min in calls of {int(limit):,}"
            for limit, seconds in projected.items()
        )
        + f" (linearly from the rate: {TARGET / purge['runs_per_s'] / 60:,.1f} min).",
        "",
        f"| {WRITERS} writer processes, ~2 KB transitions, {pace} | alone | during the purge "
        "| ratio |",
        "|---|---|---|---|",
        f"| transitions/s | {alone['per_s']:,.0f} | {during['per_s']:,.0f} "
        f"| {during['per_s'] / alone['per_s']:.2f}x |",
    ]
    for key, name in (("p50_ms", "p50 ms"), ("p99_ms", "p99 ms"), ("max_ms", "max ms")):
        lines.append(
            f"| latency {name} | {alone[key]:.2f} | {during[key]:.2f} "
            f"| {during[key] / alone[key]:.2f}x |"
        )
    seen = {kind: sum(waits[kind].values()) for kind in ("alone", "purge")}
    lines.append(
        "| writer statements seen waiting on a row/tuple/table lock | "
        + " | ".join(f"{locked(waits[kind])} of {seen[kind]}" for kind in ("alone", "purge"))
        + " | |"
    )
    lines.append(
        "| … on the ordering lock (Lock:advisory) | "
        + " | ".join(
            f"{waits[kind].get('Lock:advisory', 0)} of {seen[kind]}" for kind in ("alone", "purge")
        )
        + " | |"
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dsn", default=DSN)
    parser.add_argument("--runs", type=int, default=RUNS, help="finished runs to purge")
    parser.add_argument("--limit", type=int, default=LIMIT, help="runs per apply_retention")
    parser.add_argument("--rate", type=float, default=RATE, help="writes/s in all; 0: unpaced")
    args = parser.parse_args()
    runs = args.runs - args.runs % CREATORS
    results: dict[str, Any] = {
        **stamp(),
        **measure(args.dsn, runs, args.limit, args.rate),
    }
    save("purge", results)
    print(f"\nActae purge benchmark, {results['date']}, {results['machine']}\n")
    print(table(results))


if __name__ == "__main__":
    main()
