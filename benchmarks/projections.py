"""Read-side benchmark: projection catch-up events/s and live lag at a fixed write rate.

Catch-up: a backlog of events (written as real channel events, many per transaction to
build it quickly) is projected from zero; beside it, a raw psycopg baseline reads the same
number of rows in batches and upserts one row per channel per batch with its tracking
position. Live: writers transition at a fixed total rate while the projector and a global
subscription follow; lag is the time from a write's commit (its call returning) to the
projector committing it / the subscriber receiving it.

Run with ``python -m benchmarks.projections [--dsn DSN] [--sqlite-only]``.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import sql

import actae
from actae.domain.channel import Channel
from benchmarks.common import DSN, RESULTS, progress

BACKLOG = 20_000
PER_TRANSACTION = 500
LIVE_RATE = 500  # transitions per second, all writers together
LIVE_SECONDS = 8
WRITERS = 4


def build_backlog(store: actae.Store, events: int) -> None:
    """Real channel events, ``PER_TRANSACTION`` per save, across several runs."""
    service = store._service
    runs = [store.start_run(f"backlog-{i}", agent_id="a", state={}) for i in range(20)]
    written = 0
    while written < events:
        for run in runs:
            channel = Channel.from_head(service.reader.head_event(run.channel_id))
            for n in range(PER_TRANSACTION):
                channel.record(kind="k", payload={"n": n}, operation_id=None, at=datetime.now(UTC))
            service.save(channel)
            written += PER_TRANSACTION
            if written >= events:
                break


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def catch_up(url: str) -> float:
    with actae.open(url) as store:
        build_backlog(store, BACKLOG)
        projector = store.projector(batch_size=2000)
        start = time.perf_counter()
        count = projector.catch_up()
        return count / (time.perf_counter() - start)


def raw_catch_up(dsn: str) -> float:
    schema = f"bench_raw_{uuid.uuid4().hex[:8]}"
    ident = sql.Identifier(schema)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(ident))
        conn.execute(
            sql.SQL(
                "CREATE TABLE {}.events (id bigserial PRIMARY KEY, channel uuid, "
                "cursor bigint, payload jsonb)"
            ).format(ident)
        )
        conn.execute(
            sql.SQL("CREATE TABLE {}.heads (channel uuid PRIMARY KEY, cursor bigint)").format(ident)
        )
        conn.execute(
            sql.SQL("CREATE TABLE {}.tracking (name text PRIMARY KEY, position bigint)").format(
                ident
            )
        )
        conn.execute(sql.SQL("INSERT INTO {}.tracking VALUES ('raw', 0)").format(ident))
        channels = [uuid.uuid4() for _ in range(20)]
        conn.execute(
            sql.SQL(
                "INSERT INTO {}.events (channel, cursor, payload) SELECT "
                "(%s::uuid[])[1 + g %% 20], g, '{{\"n\": 1}}' FROM "
                "generate_series(1, %s) g"
            ).format(ident),
            (channels, BACKLOG),
        )
        start = time.perf_counter()
        position = 0
        while True:
            with conn.transaction():
                rows = conn.execute(
                    sql.SQL(
                        "SELECT id, channel, cursor, payload FROM {}.events "
                        "WHERE id > %s ORDER BY id LIMIT 2000"
                    ).format(ident),
                    (position,),
                ).fetchall()
                if not rows:
                    break
                heads = {row[1]: row[2] for row in rows}
                with conn.cursor() as cursor:
                    cursor.executemany(
                        sql.SQL(
                            "INSERT INTO {}.heads VALUES (%s, %s) ON CONFLICT (channel) "
                            "DO UPDATE SET cursor = excluded.cursor"
                        ).format(ident),
                        list(heads.items()),
                    )
                position = rows[-1][0]
                conn.execute(
                    sql.SQL("UPDATE {}.tracking SET position = %s").format(ident), (position,)
                )
        elapsed = time.perf_counter() - start
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(ident))
    return BACKLOG / elapsed


def live_lag(url: str) -> dict[str, Any]:
    with actae.open(url) as store:
        runs = [store.start_run(f"live-{i}", agent_id="a", state={"n": 0}) for i in range(WRITERS)]
        store.projector(batch_size=2000).catch_up()
        written: dict[tuple[Any, int], float] = {}
        projected: list[float] = []
        delivered: list[float] = []
        worker = subprocess.Popen(  # the projector in its own process, as in production
            [sys.executable, "-m", "benchmarks.projections", "--projector-worker", url],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert worker.stdout is not None
        assert worker.stdout.readline().strip() == "ready"

        def read_projected() -> None:
            assert worker.stdout is not None
            for line in worker.stdout:
                channel, cursor, at = line.split()
                started = written.get((uuid.UUID(channel), int(cursor)))
                if started is not None:
                    projected.append(float(at) - started)

        reader = threading.Thread(target=read_projected, daemon=True)
        reader.start()
        subscription = store.subscribe(after=store._service.recorder.max_notification_id() or 0)

        def follow() -> None:
            for event in subscription:
                at = written.get((event.channel_id, event.cursor))
                if at is not None:
                    delivered.append(time.time() - at)

        follower = threading.Thread(target=follow, daemon=True)
        follower.start()
        interval = WRITERS / LIVE_RATE

        def write(run: actae.RunInfo) -> None:
            head = store.head(run.channel_id)
            next_at = time.perf_counter()
            deadline = next_at + LIVE_SECONDS
            while next_at < deadline:
                time.sleep(max(0.0, next_at - time.perf_counter()))  # pacing the load
                head = store.transition(
                    run.channel_id,
                    kind="s",
                    payload={},
                    state={"n": 1},
                    expected_version=head.state_version,
                    expected_cursor=head.cursor,
                )
                written[(run.channel_id, head.cursor)] = time.time()
                next_at += interval

        writers = [threading.Thread(target=write, args=(run,)) for run in runs]
        start = time.perf_counter()
        for writer in writers:
            writer.start()
        for writer in writers:
            writer.join()
        achieved = len(written) / (time.perf_counter() - start)
        deadline = time.monotonic() + 10
        while (len(projected) < len(written) or len(delivered) < len(written)) and (
            time.monotonic() < deadline
        ):
            time.sleep(0.01)  # let the readers drain, bounded
        worker.terminate()
        worker.wait()
        subscription.close()
    return {
        "write_rate": achieved,
        "projection_lag_ms": {
            "p50": percentile(projected, 0.5) * 1000,
            "p99": percentile(projected, 0.99) * 1000,
        },
        "subscription_lag_ms": {
            "p50": percentile(delivered, 0.5) * 1000,
            "p99": percentile(delivered, 0.99) * 1000,
        },
        "samples": len(written),
    }


def projector_worker(url: str) -> None:
    """Follow live and print ``channel cursor committed_at`` for every projected event."""
    with actae.open(url) as store:
        projector = store.projector(batch_size=2000)
        projector.catch_up()

        def on_batch(notifications: Any) -> None:
            now = time.time()
            lines = [f"{n.originator_id} {n.originator_version} {now}\n" for n in notifications]
            sys.stdout.write("".join(lines))
            sys.stdout.flush()

        projector.on_batch = on_batch
        signal.signal(signal.SIGTERM, lambda *_: projector.request_stop())
        print("ready", flush=True)
        projector.run()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--projector-worker", metavar="URL")
    parser.add_argument("--dsn", default=DSN)
    parser.add_argument("--sqlite-only", action="store_true")
    args = parser.parse_args()
    if args.projector_worker:
        projector_worker(args.projector_worker)
        return
    results: dict[str, Any] = {"date": datetime.now(UTC).isoformat(timespec="seconds")}
    with tempfile.TemporaryDirectory() as folder:
        progress("SQLite: catch-up")
        results["sqlite"] = {"catch_up_per_s": catch_up(f"sqlite:///{folder}/a.db")}
        progress("SQLite: live lag")
        results["sqlite"]["live"] = live_lag(f"sqlite:///{folder}/b.db")
    if not args.sqlite_only:
        schema = f"bench_proj_{uuid.uuid4().hex[:8]}"
        url = f"{args.dsn}{'&' if '?' in args.dsn else '?'}schema={schema}"
        try:
            progress("PostgreSQL: catch-up")
            results["postgresql"] = {
                "catch_up_per_s": catch_up(url + "a"),
                "raw_catch_up_per_s": raw_catch_up(args.dsn),
            }
            progress("PostgreSQL: live lag")
            results["postgresql"]["live"] = live_lag(url + "b")
        finally:
            with psycopg.connect(args.dsn, autocommit=True) as conn:
                for name in (schema + "a", schema + "b"):
                    conn.execute(
                        sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name))
                    )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "projections.json").write_text(json.dumps(results, indent=2))
    print(f"\nActae read-side benchmark, {results['date']}\n")
    print(
        "| backend | catch-up events/s | raw psycopg | ratio | write rate/s | projection lag "
        "p50 / p99 ms | subscription lag p50 / p99 ms |"
    )
    print("|---|---|---|---|---|---|---|")
    for backend in ("sqlite", "postgresql"):
        if backend not in results:
            continue
        data, live = results[backend], results[backend]["live"]
        ours, raw = data["catch_up_per_s"], data.get("raw_catch_up_per_s")
        raw_text, ratio = (f"{raw:,.0f}", f"{ours / raw:.0%}") if raw else ("-", "-")
        print(
            f"| {backend} | {ours:,.0f} | {raw_text} | {ratio} | "
            f"{live['write_rate']:,.0f} | {live['projection_lag_ms']['p50']:.1f} / "
            f"{live['projection_lag_ms']['p99']:.1f} | {live['subscription_lag_ms']['p50']:.1f}"
            f" / {live['subscription_lag_ms']['p99']:.1f} |"
        )


if __name__ == "__main__":
    main()
