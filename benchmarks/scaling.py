"""Scaling benchmark: whether PostgreSQL group-commits Actae's writes from many processes.

With ``synchronous_commit = on`` every commit waits until its WAL is flushed to disk. When
several sessions commit at once, one flush can cover all of their commit records (group
commit), so the number of flushes grows more slowly than the number of commits and the
commit rate grows with the number of writers. A write that holds a lock across its commit,
or that sends ``NOTIFY`` in its transaction (a cluster-wide lock held until the commit
record is flushed), serialises the flushes: one per commit, whatever the writers. This
benchmark asks whether Actae's transitions group-commit like plain INSERTs do: for 1, 4
and 8 writer processes, how many commits per second, how many WAL flushes per commit, and
how much CPU per write, beside the raw baseline measured in the same run.

The two sides:

* **raw**: ``benchmarks.raw.raw_process``, one autocommitted ``INSERT`` of an event row with
  ~2 KB of JSON state per transaction, one connection per process;
* **Actae**: ``benchmarks.core.actae_process``, ``Store.transition`` with the same state on
  a run of its own per process, through ``actae.open`` on a scratch schema.

Each turn forks ``writers`` client processes of one side (``benchmarks.core.in_processes``:
each connects, then all start together) writing about ``--seconds`` worth of writes (sized
from that side's previous rate at that many writers; a short warm-up turn of each sizes the
first round). A round is a raw turn then an Actae turn for each number of writers; there
are several rounds, and the figures are medians over rounds. Ratios (Actae ÷ raw, 8 ÷ 1
writers) are taken within each round, then their median, because this VM's speed drifts.

Measured around each turn:

* **commits per second**: writes ÷ time from the common start to the last process's end;
* **WAL flushes per commit**: ``Δ pg_stat_wal.wal_sync`` ÷ the turn's writes. Each write
  (a raw ``INSERT`` or an Actae transition) is one transaction of its own whose commit waits
  for a flush, so this is flushes per commit that needs one: 1.0 is one flush per commit,
  less is group commit. The server's own counts of commits are the wrong denominator:
  ``pg_stat_database.xact_commit`` also counts read-only transactions, and the next
  transaction id (``pg_snapshot_xmax(pg_current_snapshot())``) also counts transactions
  that got an id without writing data, such as the ``NOTIFY`` that Actae's notifier sends
  after writes on a connection of its own (a ``NOTIFY`` takes a transaction id; its commit
  does not wait for a flush). Both are reported per write beside, so that the difference
  shows. ``wal_sync`` is cluster-wide: it includes the WAL writer's background flushes,
  the few commits of a turn's set-up (``start_run`` in each Actae process, a fraction of a
  percent of a turn) and anything else running on the server, so run this on a quiet
  server; the benchmark's own monitoring queries are read-only and flush nothing. Backends
  report their statistics when they exit, so each turn's counters are read once every
  backend of the turn has gone (they are tagged with an ``application_name`` of their own);
* **machine CPU µs per write**: all cores' busy time (``/proc/stat``, client and server,
  ``benchmarks.anatomy.machine_busy_seconds``) from the common start to the end, ÷ writes.

``wal_sync`` counts flushes only when ``fsync`` is on and ``wal_sync_method`` is
``fdatasync``, ``fsync`` or ``fsync_writethrough``; ``commit_delay`` makes the server wait
for more commits before flushing. These settings are read (never changed) and printed with
the results.

Run with ``python -m benchmarks.scaling [--dsn DSN] [--seconds S] [--quick]``: ``--seconds``
is each turn's length (5 s, or 1 s with ``--quick``, which also runs 3 rounds instead of 5;
about 3 minutes in all, or half a minute). Results are printed as a markdown table and
written to ``benchmarks/results/scaling.json``.
"""

from __future__ import annotations

import argparse
import time
import uuid
from collections.abc import Callable
from typing import Any

import psycopg

import actae
from benchmarks.anatomy import machine_busy_seconds
from benchmarks.common import (
    DSN,
    QUICK_RUN,
    medians,
    progress,
    save,
    scratch_schema,
    stamp,
    with_schema,
)
from benchmarks.core import actae_process, in_processes
from benchmarks.raw import RawBaseline, raw_process

WRITERS = (1, 4, 8)
SIDES = ("raw", "actae")
ROUNDS, QUICK_ROUNDS = 5, 3
SECONDS, QUICK_SECONDS = 5.0, 1.0
WARMUP, AT_LEAST = 50, 20  # writes per process: the warm-up turn, and any turn at least
SETTLE = 10.0  # seconds to wait at most for a turn's backends to exit
SETTINGS = (
    "server_version",
    "synchronous_commit",
    "commit_delay",
    "commit_siblings",
    "fsync",
    "wal_sync_method",
)
COUNTERS = (
    "SELECT w.wal_sync, w.wal_write, d.xact_commit, "
    "pg_snapshot_xmax(pg_current_snapshot())::text::bigint "
    "FROM pg_stat_wal w, pg_stat_database d WHERE d.datname = current_database()"
)

Job = Callable[[int], Callable[..., None]]
"""A side's client job for ``in_processes``, given how many writes each process makes."""


def settings(monitor: psycopg.Connection[Any]) -> dict[str, str]:
    """The server settings that decide how commits are flushed (read, never changed)."""
    rows = monitor.execute(
        "SELECT name, setting, coalesce(unit, '') FROM pg_settings WHERE name = ANY(%s)",
        (list(SETTINGS),),
    ).fetchall()
    found = {name: f"{setting}{' ' + unit if unit else ''}" for name, setting, unit in rows}
    return {name: found.get(name, "?") for name in SETTINGS}


def counters(monitor: psycopg.Connection[Any]) -> tuple[int, ...]:
    """WAL syncs, WAL writes, commits in this database, next transaction id."""
    row = monitor.execute(COUNTERS).fetchone()
    assert row is not None
    return tuple(int(value) for value in row)


def settle(monitor: psycopg.Connection[Any], app: str) -> None:
    """Wait until every backend named ``app`` has exited (and so reported its statistics)."""
    deadline = time.monotonic() + SETTLE
    while time.monotonic() < deadline:
        row = monitor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (app,)
        ).fetchone()
        if row is not None and row[0] == 0:
            return
        time.sleep(0.02)
    progress(f"backends of the turn still there after {SETTLE:.0f} s; reading counters anyway")


def turn(
    monitor: psycopg.Connection[Any], app: str, job: Callable[..., None], writers: int, each: int
) -> dict[str, float]:
    """One turn of ``writers`` processes making ``each`` writes; its figures."""
    before = counters(monitor)
    busy: list[float] = []
    per_s, _ = in_processes(job, writers, each, lambda: busy.append(machine_busy_seconds()))
    cpu = machine_busy_seconds() - busy[0]
    settle(monitor, app)
    syncs, wal_writes, commits, xids = (
        b - a for a, b in zip(before, counters(monitor), strict=True)
    )
    writes = writers * each
    return {
        "per_s": per_s,
        "flushes_per_commit": syncs / writes,
        "wal_writes_per_commit": wal_writes / writes,
        "xact_commits_per_write": commits / writes,
        "xids_per_write": xids / writes,
        "machine_cpu_us": cpu / writes * 1e6,
    }


def measure(dsn: str, seconds: float, rounds: int) -> dict[str, Any]:
    """Every round of every side at every number of writers, and the server's settings."""
    app = f"actae-scaling-{uuid.uuid4().hex[:8]}"
    tagged = f"{dsn}{'&' if '?' in dsn else '?'}application_name={app}"
    with (
        scratch_schema(dsn, "bench_scaling") as schema,
        scratch_schema(dsn, "bench_scaling_raw") as raw_schema,
        psycopg.connect(dsn, autocommit=True) as monitor,
    ):
        raw = RawBaseline(tagged, raw_schema)
        url = with_schema(tagged, schema)
        with actae.open(url):
            pass  # creates the schema once; no store is open while client processes fork
        jobs: dict[str, Job] = {
            "raw": lambda each: raw_process(raw, each),
            "actae": lambda each: actae_process(url, each),
        }
        progress(f"warm-up: {WARMUP} writes per process, each side at {WRITERS} writers")
        rates = {
            (side, writers): turn(monitor, app, jobs[side](WARMUP), writers, WARMUP)["per_s"]
            for writers in WRITERS
            for side in SIDES
        }
        done: list[dict[str, Any]] = []
        for round_ in range(1, rounds + 1):
            progress(f"round {round_} of {rounds}: raw then Actae at {WRITERS} writers")
            figures: dict[str, Any] = {}
            for writers in WRITERS:
                sides: dict[str, Any] = {}
                for side in SIDES:
                    each = max(AT_LEAST, round(rates[side, writers] * seconds / writers))
                    sides[side] = turn(monitor, app, jobs[side](each), writers, each)
                    rates[side, writers] = sides[side]["per_s"]
                sides["actae_of_raw"] = sides["actae"]["per_s"] / sides["raw"]["per_s"]
                figures[str(writers)] = sides
            first, last = str(WRITERS[0]), str(WRITERS[-1])
            figures["scaling"] = {
                side: figures[last][side]["per_s"] / figures[first][side]["per_s"] for side in SIDES
            }
            done.append(figures)
        return {"settings": settings(monitor), "medians": medians(done), "rounds": done}


# -- report ---------------------------------------------------------------------------------


def table(results: dict[str, Any]) -> str:
    """The medians as a markdown table, with the 8 ÷ 1 writers scaling below."""
    data = results["medians"]
    lines = [
        "| writers | raw /s | Actae /s | Actae ÷ raw | raw flushes/commit "
        "| Actae flushes/commit | raw CPU µs/write | Actae CPU µs/write |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for writers in WRITERS:
        row = data[str(writers)]
        raw, ours = row["raw"], row["actae"]
        lines.append(
            f"| {writers} | {raw['per_s']:,.0f} | {ours['per_s']:,.0f} "
            f"| {row['actae_of_raw']:.0%} | {raw['flushes_per_commit']:.2f} "
            f"| {ours['flushes_per_commit']:.2f} | {raw['machine_cpu_us']:,.0f} "
            f"| {ours['machine_cpu_us']:,.0f} |"
        )
    first, last = WRITERS[0], WRITERS[-1]
    scaling = data["scaling"]

    def per_write(key: str) -> str:
        return "; ".join(
            f"{w}: raw {data[str(w)]['raw'][key]:.2f}, Actae {data[str(w)]['actae'][key]:.2f}"
            for w in WRITERS
        )

    lines += [
        "",
        f"- {last} ÷ {first} writers, commits per second: raw {scaling['raw']:.2f}x, "
        f"Actae {scaling['actae']:.2f}x",
        f"- WAL writes per write, by writers: {per_write('wal_writes_per_commit')}",
        f"- xact_commit per write, by writers: {per_write('xact_commits_per_write')}",
        f"- transaction ids per write, by writers: {per_write('xids_per_write')}",
        f"- flushes/commit: WAL syncs per write (each write commits once); medians of "
        f"{len(results['rounds'])} rounds of {results['seconds_per_turn']:g} s turns",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dsn", default=DSN)
    parser.add_argument("--seconds", type=float, help="length of each turn (5, or 1 if --quick)")
    parser.add_argument("--quick", action="store_true", help="3 rounds of 1-second turns")
    args = parser.parse_args()
    quick = args.quick or QUICK_RUN
    seconds = args.seconds or (QUICK_SECONDS if quick else SECONDS)
    started = time.perf_counter()
    results: dict[str, Any] = {
        **stamp(),
        "quick": quick,
        "seconds_per_turn": seconds,
        "writers": list(WRITERS),
        **measure(args.dsn, seconds, QUICK_ROUNDS if quick else ROUNDS),
    }
    results["wall_seconds"] = time.perf_counter() - started
    save("scaling", results)
    server = ", ".join(f"{name} = {value}" for name, value in results["settings"].items())
    print(f"\nActae scaling benchmark, {results['date']}, {results['machine']}")
    print(f"PostgreSQL: {server}\n")
    print(table(results))


if __name__ == "__main__":
    main()
