"""Core benchmark: head/state_at latency by history length, and transitions per second.

Every Actae figure is printed beside a raw psycopg baseline doing the same work in the same
run (one table, one statement per operation), as a ratio. Run with ``make bench`` or
``python -m benchmarks.core [--dsn DSN] [--sqlite-only]``. Results are printed as a markdown
table and written to ``benchmarks/results/core.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import psycopg
from psycopg import sql

import actae

DSN = "postgresql://postgres@127.0.0.1:5432/test"
STATE = {"notes": "x" * 1900, "step": 0}  # ~2 KB, as in DESIGN.md §6
LATENCY_SAMPLES = 300
RESULTS = Path(__file__).with_name("results")


def progress(text: str) -> None:
    print(f"  … {text}", flush=True)


def latency(call: Callable[[], object], samples: int = LATENCY_SAMPLES) -> dict[str, float]:
    """p50 and p99 in milliseconds."""
    timings = []
    for _ in range(samples):
        start = time.perf_counter()
        call()
        timings.append((time.perf_counter() - start) * 1000)
    timings.sort()
    return {"p50_ms": statistics.median(timings), "p99_ms": timings[int(len(timings) * 0.99) - 1]}


def fill(store: actae.Store, events: int) -> actae.RunInfo:
    """A channel of ``events`` events: a transition every 50, records in between.

    The last transition is 5 events before the head whatever the length, so ``state_at``
    at the head always needs its second lookup and ``recover`` always returns 5 events.
    """
    run = store.start_run(f"bench-{uuid.uuid4()}", agent_id="bench", state=STATE)
    head = store.head(run.channel_id)
    for n in range(2, events + 1):
        if (events - n) % 50 == 5:
            head = store.transition(
                run.channel_id,
                kind="step",
                payload={"n": n},
                state={**STATE, "step": n},
                expected_version=head.state_version,
                expected_cursor=head.cursor,
            )
        else:
            head = store.record(
                run.channel_id, kind="note", payload={"n": n}, expected_cursor=head.cursor
            )
        if n % 2500 == 0:
            progress(f"{n}/{events} events written")
    return run


def read_latencies(url: str) -> dict[str, Any]:
    """Head / state_at / recover latency on channels of 10 and 10,000 events."""
    out: dict[str, Any] = {}
    with actae.open(url) as store:
        # Fill both first, so both are measured against the same table size.
        channels = {size: fill(store, size).channel_id for size in (10, 10_000)}
        for size, channel in channels.items():
            middle = size // 2 + 1
            out[str(size)] = {
                "head": latency(partial(store.head, channel)),
                "state_at_head": latency(partial(store.state_at, channel)),
                "state_at_middle": latency(partial(store.state_at, channel, cursor=middle)),
                "recover": latency(partial(store.recover, channel)),
            }
    return out


class RawBaseline:
    """The same work with plain psycopg: one table, one statement per operation."""

    def __init__(self, dsn: str, schema: str) -> None:
        self.dsn, self.schema = dsn, schema
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
            conn.execute(
                sql.SQL(
                    "CREATE TABLE {}.events (channel_id uuid, cursor bigint, state_version int, "
                    "state_cursor bigint, kind text, payload jsonb, state jsonb, "
                    "PRIMARY KEY (channel_id, cursor))"
                ).format(sql.Identifier(schema))
            )

    def table(self) -> sql.Composed:
        """The baseline's single events table."""
        return sql.SQL("{}.events").format(sql.Identifier(self.schema))

    def transitions(self, conn: psycopg.Connection[Any], channel: uuid.UUID, count: int) -> None:
        """``count`` transitions, one autocommitted INSERT each."""
        insert = sql.SQL("INSERT INTO {} VALUES (%s, %s, %s, %s, %s, %s, %s)").format(self.table())
        for cursor in range(1, count + 1):
            conn.execute(
                insert,
                (
                    channel,
                    cursor,
                    cursor,
                    cursor,
                    "step",
                    orjson.dumps({"n": cursor}).decode(),
                    orjson.dumps({**STATE, "step": cursor}).decode(),
                ),
            )

    def reads(self, conn: psycopg.Connection[Any], channel: uuid.UUID) -> dict[str, Any]:
        """Head and state-at-cursor latency (event lookup, then its state's lookup)."""
        head = sql.SQL(
            "SELECT cursor, state_version FROM {} WHERE channel_id = %s "
            "ORDER BY cursor DESC LIMIT 1"
        ).format(self.table())
        at = sql.SQL("SELECT state_cursor FROM {} WHERE channel_id = %s AND cursor = %s").format(
            self.table()
        )
        state = sql.SQL("SELECT state FROM {} WHERE channel_id = %s AND cursor = %s").format(
            self.table()
        )

        def state_at() -> object:
            row = conn.execute(at, (channel, 5000)).fetchone()
            assert row is not None
            return conn.execute(state, (channel, row[0])).fetchone()

        return {
            "head": latency(lambda: conn.execute(head, (channel,)).fetchone()),
            "state_at_middle": latency(state_at),
        }


def rate(run_one: Callable[[int], None], workers: int, per_worker: int) -> float:
    threads = [threading.Thread(target=run_one, args=(i,)) for i in range(workers)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return workers * per_worker / (time.perf_counter() - start)


def actae_transitions(store: actae.Store, count: int) -> Callable[[int], None]:
    def run_one(index: int) -> None:
        run = store.start_run(f"tps-{uuid.uuid4()}", agent_id="bench", state=STATE)
        head = store.head(run.channel_id)
        for n in range(count):
            head = store.transition(
                run.channel_id,
                kind="step",
                payload={"n": n},
                state={**STATE, "step": n},
                expected_version=head.state_version,
                expected_cursor=head.cursor,
                operation_id=f"{run.run_id}:{n}",
            )

    return run_one


def raw_transitions(raw: RawBaseline, count: int) -> Callable[[int], None]:
    def run_one(index: int) -> None:
        with psycopg.connect(raw.dsn, autocommit=True) as conn:
            raw.transitions(conn, uuid.uuid4(), count)

    return run_one


def postgres(dsn: str) -> dict[str, Any]:
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    url = f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}"
    raw = RawBaseline(dsn, f"{schema}_raw")
    try:
        progress("PostgreSQL: reads on 10 and 10,000 events")
        reads = read_latencies(url)
        with psycopg.connect(dsn, autocommit=True) as conn:
            channel = uuid.uuid4()
            raw.transitions(conn, channel, 10_000)
            raw_reads = raw.reads(conn, channel)
        progress("PostgreSQL: transitions on 1 and 4 connections")
        with actae.open(url + "&pool_size=4") as store:
            tps = {
                str(w): rate(actae_transitions(store, n), w, n) for w, n in ((1, 1500), (4, 750))
            }
        raw_tps = {str(w): rate(raw_transitions(raw, n), w, n) for w, n in ((1, 1500), (4, 750))}
        return {"reads": reads, "raw_reads": raw_reads, "tps": tps, "raw_tps": raw_tps}
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            for name in (schema, f"{schema}_raw"):
                conn.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name))
                )


def table(results: dict[str, Any]) -> str:
    lines = [
        "| backend | measure | 10 events | 10,000 events | raw psycopg (10,000) | ratio |",
        "|---|---|---|---|---|---|",
    ]
    for backend in ("sqlite", "postgresql"):
        if backend not in results:
            continue
        data = results[backend]
        for measure in ("head", "state_at_head", "state_at_middle", "recover"):
            small = data["reads"]["10"][measure]["p50_ms"]
            big = data["reads"]["10000"][measure]["p50_ms"]
            raw = data.get("raw_reads", {}).get(measure, {}).get("p50_ms")
            ratio = f"{big / raw:.2f}x raw" if raw else "-"
            lines.append(
                f"| {backend} | {measure} p50 ms | {small:.3f} | {big:.3f} | "
                f"{f'{raw:.3f}' if raw else '-'} | {ratio} |"
            )
    if "postgresql" in results:
        pg = results["postgresql"]
        lines += [
            "",
            "| PostgreSQL transitions/s (~2 KB state) | Actae | raw psycopg | ratio |",
            "|---|---|---|---|",
        ]
        for workers in ("1", "4"):
            ours, raw = pg["tps"][workers], pg["raw_tps"][workers]
            lines.append(
                f"| {workers} connection(s) | {ours:,.0f} | {raw:,.0f} | {ours / raw:.0%} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dsn", default=DSN)
    parser.add_argument("--sqlite-only", action="store_true")
    args = parser.parse_args()
    results: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.node()} {platform.machine()} {platform.python_version()}",
    }
    with tempfile.TemporaryDirectory() as folder:
        progress("SQLite: reads on 10 and 10,000 events")
        results["sqlite"] = {"reads": read_latencies(f"sqlite:///{folder}/bench.db")}
    if not args.sqlite_only:
        results["postgresql"] = postgres(args.dsn)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "core.json").write_text(json.dumps(results, indent=2))
    print(f"\nActae core benchmark, {results['date']}, {results['machine']}\n")
    print(table(results))


if __name__ == "__main__":
    main()
