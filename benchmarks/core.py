"""Core benchmark: reads by history length, and transitions (rate, latency, CPU, disk).

Every Actae figure is printed beside a raw psycopg baseline doing the same work in the same
run, as a ratio. The raw transition is one autocommitted ``INSERT`` of the event row with its
~2 KB state and a unique operation id (the idempotency key); Actae's transition writes one
row too, after its checks: the channel event, which is also its operation record. The raw reads
are the same index lookups an Actae read needs (head; event, then the state it points to;
that plus the tail after it), with psycopg on PostgreSQL and the standard library's sqlite3
on SQLite.

Run with ``make bench`` or ``python -m benchmarks.core [--dsn DSN] [--sqlite-only] [--quick]``.
Results are printed as markdown tables and written to ``benchmarks/results/core.json``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any

import psycopg

import actae
from actae.domain.channel import Channel
from benchmarks.common import (
    DSN,
    QUICK_RUN,
    STATE,
    drop_schemas,
    latency,
    medians,
    progress,
    save,
    schema_bytes,
    stamp,
    summary,
    with_schema,
)
from benchmarks.raw import (
    RawBaseline,
    raw_process,
    raw_read_latencies,
    raw_sqlite_read_latencies,
)

SIZES = (1_000, 10_000, 100_000)
FILL_CHUNK = 4_000  # events per save while filling a long channel (a write holds <= 4,096)
# 1 connection: Actae and raw alternate, 100 transitions a turn
TURN, TURNS = (20, 3) if QUICK_RUN else (100, 10)
WORKERS, PER_WORKER = 4, 30 if QUICK_RUN else 300  # client processes, transitions each
ROUNDS = 1 if QUICK_RUN else 3  # Actae and raw take turns, round by round; medians reported


# -- reads ----------------------------------------------------------------------------------


def fill(store: actae.Store, events: int) -> actae.RunInfo:
    """A channel of ``events`` real channel events: a transition every 50, records between.

    The events come from the domain model (``Channel``) and are saved ``FILL_CHUNK`` per
    transaction through the store's own recorder, so a 100,000-event channel takes seconds;
    the reads below are what is measured. The last transition is 5 events before the head
    whatever the length, so ``state_at`` at the head always needs its second lookup and
    ``recover`` always returns 5 events.
    """
    service = store._service  # bulk filling is benchmark set-up, not a public verb
    run = store.start_run(f"bench-{uuid.uuid4()}", agent_id="bench", state=STATE)
    channel = Channel.from_head(service.reader.head_event(run.channel_id))
    at = datetime.now(UTC)
    for n in range(2, events + 1):
        if (events - n) % 50 == 5:
            state = {**STATE, "step": n}
            checksum = service.core.document("state", state).checksum
            channel.transition(
                kind="step",
                payload={"n": n},
                state=state,
                state_checksum=checksum,
                operation_id=None,
                at=at,
            )
        else:
            channel.record(kind="note", payload={"n": n}, operation_id=None, at=at)
        if n % FILL_CHUNK == 0 or n == events:
            service.save(channel)
    return run


def read_latencies(url: str, sizes: tuple[int, ...]) -> dict[str, Any]:
    """Head / state_at / recover latency on channels of each size, one table for all."""
    out: dict[str, Any] = {}
    with actae.open(url) as store:
        channels = {}
        for size in sizes:
            progress(f"filling a channel of {size:,} events")
            channels[size] = fill(store, size).channel_id
        for size, channel in channels.items():
            middle = size // 2 + 1
            out[str(size)] = {
                "head": latency(partial(store.head, channel)),
                "state_at_head": latency(partial(store.state_at, channel)),
                "state_at_middle": latency(partial(store.state_at, channel, cursor=middle)),
                "recover": latency(partial(store.recover, channel)),
            }
    return out


# -- transitions ----------------------------------------------------------------------------


def transition_step(store: actae.Store, run: actae.RunInfo, head: Any, n: int) -> actae.Receipt:
    """The measured Actae transition: ~2 KB state, an operation id, the head just seen."""
    return store.transition(
        run.channel_id,
        kind="step",
        payload={"n": n},
        state={**STATE, "step": n},
        expected_version=head.state_version,
        expected_cursor=head.cursor,
        operation_id=f"{run.run_id}:{n}",
    )


def actae_transitions(
    store: actae.Store,
    count: int,
    timings: list[float] | None = None,
    run: actae.RunInfo | None = None,
    first: int = 0,
) -> Callable[[int], None]:
    """A function writing ``count`` transitions, numbered from ``first``, on ``run``.

    Numbers must not repeat on one run: a repeated number is a repeated operation id,
    which Actae answers by replaying the recorded result instead of writing.
    """

    def run_one(index: int) -> None:
        mine = run or store.start_run(f"tps-{uuid.uuid4()}", agent_id="bench", state=STATE)
        head = store.head(mine.channel_id)
        for n in range(first, first + count):
            start = time.perf_counter()
            head = transition_step(store, mine, head, n)
            if timings is not None:
                timings.append((time.perf_counter() - start) * 1000)

    return run_one


class Turns:
    """Elapsed time, client CPU and latencies of one side of an interleaved measurement."""

    def __init__(self) -> None:
        self.elapsed = self.cpu = 0.0
        self.count = 0
        self.timings: list[float] = []

    def take(self, count: int, write: Callable[[], list[float]]) -> None:
        """Run one turn of ``count`` writes; ``write`` returns their latencies in ms."""
        cpu, start = time.process_time(), time.perf_counter()
        self.timings.extend(write())
        self.elapsed += time.perf_counter() - start
        self.cpu += time.process_time() - cpu
        self.count += count

    def figures(self) -> dict[str, Any]:
        """Rate, client CPU per write and latency over all turns taken."""
        return {
            "per_s": self.count / self.elapsed,
            "cpu_us": self.cpu / self.count * 1e6,
            "latency": summary(self.timings),
        }


def one_connection(store: actae.Store, raw: RawBaseline) -> tuple[dict[str, Any], dict[str, Any]]:
    """Actae and raw on one connection each, taking turns every ``TURN`` transitions.

    Short alternating turns put both sides through the same moments of a shared machine
    (this VM's speed drifts by a factor of two over minutes), so their ratio is steadier
    than that of two long runs one after the other.
    """
    run = store.start_run(f"tps-{uuid.uuid4()}", agent_id="bench", state=STATE)
    ours, theirs = Turns(), Turns()
    with psycopg.connect(raw.dsn, autocommit=True) as conn:
        for turn in range(TURNS):

            def actae_turn(first: int = turn * TURN) -> list[float]:
                timings: list[float] = []
                actae_transitions(store, TURN, timings, run=run, first=first)(0)
                return timings

            ours.take(TURN, actae_turn)
            theirs.take(TURN, lambda: raw.transitions(conn, uuid.uuid4(), TURN))
    figures = [side.figures() for side in (ours, theirs)]
    for side in figures:
        side["1"] = {"per_s": side.pop("per_s")}  # the report's layout: rate per connections
    return figures[0], figures[1]


def in_processes(
    job: Callable[..., None],
    workers: int,
    per_worker: int,
    on_start: Callable[[], object] | None = None,
) -> tuple[float, list[float]]:
    """Operations per second of ``workers`` client processes, and all their latencies (ms).

    Processes, not threads: an agent fleet runs one worker process per core or more, and
    threads of one Python process would measure the GIL rather than the store. Each process
    opens its own connection before the clock starts, then runs ``job(index, ready, out)``
    and puts its list of latencies on ``out``. ``on_start`` is called when the clock starts.
    """
    context = multiprocessing.get_context("fork")
    ready = context.Barrier(workers + 1)
    out = context.Queue()
    procs = [context.Process(target=job, args=(i, ready, out)) for i in range(workers)]
    for proc in procs:
        proc.start()
    ready.wait()
    start = time.perf_counter()
    if on_start is not None:
        on_start()
    timings: list[float] = []
    for _ in procs:
        timings.extend(out.get(timeout=600))  # each client reports once, when done
    elapsed = time.perf_counter() - start
    for proc in procs:
        proc.join()
        if proc.exitcode != 0:
            raise RuntimeError(f"a benchmark client process exited with {proc.exitcode}")
    return workers * per_worker / elapsed, timings


def actae_process(url: str, count: int) -> Callable[..., None]:
    def job(index: int, ready: Any, out: Any) -> None:
        with actae.open(url) as store:
            run = store.start_run(f"tps-{uuid.uuid4()}", agent_id="bench", state=STATE)
            timings: list[float] = []
            ready.wait()
            actae_transitions(store, count, timings, run=run)(index)
            out.put(timings)

    return job


def four_processes(job: Callable[..., None]) -> dict[str, Any]:
    per_s, timings = in_processes(job, WORKERS, PER_WORKER)
    return {"per_s": per_s, "latency": summary(timings)}


def postgres(dsn: str, sizes: tuple[int, ...]) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:8]
    reads_schema, tps_schema, raw_schema = f"bench_{tag}", f"bench_{tag}_tps", f"bench_{tag}_raw"
    raw = RawBaseline(dsn, raw_schema)
    try:
        progress("PostgreSQL: reads by history length")
        reads = read_latencies(with_schema(dsn, reads_schema), sizes)
        progress("PostgreSQL: raw reads by history length")
        raw_reads = raw_read_latencies(raw, sizes)
        tps_url = with_schema(dsn, tps_schema)
        with actae.open(tps_url):
            pass  # creates the schema once; no store is open while client processes fork
        sizes_before = schema_bytes(dsn, tps_schema), schema_bytes(dsn, raw_schema)
        progress(f"PostgreSQL: transitions on 1 connection, Actae and raw by turns of {TURN}")
        with actae.open(tps_url) as store:
            ours, theirs = one_connection(store, raw)
        many: tuple[list[dict[str, Any]], list[dict[str, Any]]] = ([], [])
        for round_ in range(1, ROUNDS + 1):
            progress(f"PostgreSQL: transitions in {WORKERS} processes, round {round_} of {ROUNDS}")
            many[0].append(four_processes(actae_process(tps_url, PER_WORKER)))
            many[1].append(four_processes(raw_process(raw, PER_WORKER)))
        written = TURNS * TURN + ROUNDS * WORKERS * PER_WORKER
        for figures, rounds, schema, before in zip(
            (ours, theirs), many, (tps_schema, raw_schema), sizes_before, strict=True
        ):
            figures[str(WORKERS)] = medians(rounds)
            figures["bytes_per_transition"] = (schema_bytes(dsn, schema) - before) / written
        return {"reads": reads, "raw_reads": raw_reads, "transitions": ours, "raw": theirs}
    finally:
        drop_schemas(dsn, reads_schema, tps_schema, raw_schema)


# -- report ---------------------------------------------------------------------------------


WHO = {"1": "1 connection", "4": "4 client processes"}


def table(results: dict[str, Any]) -> str:
    sizes = results["sizes"]
    header = " | ".join(f"{size:,} events" for size in sizes)
    lines = [
        f"| backend | read p50 ms | {header} | raw ({sizes[-1]:,}) | ratio |",
        "|---|---|" + "---|" * len(sizes) + "---|---|",
    ]
    for backend in ("sqlite", "postgresql"):
        if backend not in results:
            continue
        data = results[backend]
        for measure in ("head", "state_at_head", "state_at_middle", "recover"):
            ours = [data["reads"][str(size)][measure]["p50_ms"] for size in sizes]
            raw = data.get("raw_reads", {}).get(str(sizes[-1]), {}).get(measure, {}).get("p50_ms")
            cells = " | ".join(f"{value:.3f}" for value in ours)
            raw_cells = f"{raw:.3f} | {ours[-1] / raw:.2f}x raw" if raw else "- | -"
            lines.append(f"| {backend} | {measure} | {cells} | {raw_cells} |")
    if "postgresql" in results:
        ours, raw = results["postgresql"]["transitions"], results["postgresql"]["raw"]
        lines += [
            "",
            "| PostgreSQL transition (~2 KB state) | Actae | raw psycopg | ratio |",
            "|---|---|---|---|",
        ]
        for workers in ("1", "4"):
            a, r = ours[workers]["per_s"], raw[workers]["per_s"]
            lines.append(f"| per second, {WHO[workers]} | {a:,.0f} | {r:,.0f} | {a / r:.0%} |")
        for key in ("p50_ms", "p99_ms"):
            a, r = ours["latency"][key], raw["latency"][key]
            lines.append(
                f"| latency {key[:3]} ms, 1 connection | {a:.2f} | {r:.2f} | {a / r:.2f}x |"
            )
            a, r = ours["4"]["latency"][key], raw["4"]["latency"][key]
            lines.append(f"| latency {key[:3]} ms, {WHO['4']} | {a:.2f} | {r:.2f} | {a / r:.2f}x |")
        a, r = ours["cpu_us"], raw["cpu_us"]
        lines.append(f"| client CPU µs per transition | {a:,.0f} | {r:,.0f} | {a / r:.2f}x |")
        a, r = ours["bytes_per_transition"], raw["bytes_per_transition"]
        lines.append(f"| bytes on disk per transition | {a:,.0f} | {r:,.0f} | {a / r:.2f}x |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dsn", default=DSN)
    parser.add_argument("--sqlite-only", action="store_true")
    parser.add_argument("--quick", action="store_true", help="channels of 1k and 10k only")
    args = parser.parse_args()
    sizes = SIZES[:2] if args.quick or QUICK_RUN else SIZES
    results: dict[str, Any] = {
        **stamp(),
        "sizes": list(sizes),
    }
    with tempfile.TemporaryDirectory() as folder:
        progress("SQLite: reads by history length")
        results["sqlite"] = {
            "reads": read_latencies(f"sqlite:///{folder}/bench.db", sizes),
            "raw_reads": raw_sqlite_read_latencies(f"{folder}/raw.db", sizes),
        }
    if not args.sqlite_only:
        results["postgresql"] = postgres(args.dsn, sizes)
    save("core", results)
    print(f"\nActae core benchmark, {results['date']}, {results['machine']}\n")
    print(table(results))


if __name__ == "__main__":
    main()
