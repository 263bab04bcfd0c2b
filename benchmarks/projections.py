"""Read-side benchmark: projection catch-up events/s and live lag at a fixed write rate.

Catch-up: a backlog of events (written as real channel events, many per transaction to
build it quickly) is projected from zero; beside it, a raw psycopg baseline reads the same
number of rows in batches and upserts one row per channel per batch with its tracking
position. Live: writers (threads of this process) transition at a fixed total rate while
the projector and a global subscription follow, each in a process of its own, so neither
is woken by the writers' commits and both find new events by their backoff's looks (the
case the backoff serves); lag is the time from a write's commit (its call returning) to
the projector committing it / the subscriber receiving it. The live run is made twice on
PostgreSQL: as is, and with other clients' transactions held open throughout
(``foreign_transactions``: one in another database, one here that took a transaction id
and read every table and sequence of the store, as ``pg_dump`` does).

Run with ``python -m benchmarks.projections [--dsn DSN] [--sqlite | --sqlite-only]``; SQLite
(where the projector in another process polls every 20 ms) has no raw baseline, so ``make
bench`` leaves it out.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import sql

import actae
from actae.domain.channel import Channel
from benchmarks.common import DSN, QUICK_RUN, Key, live_lags, progress, save
from benchmarks.raw import RawLive, raw_catch_up

BACKLOG = 4_000 if QUICK_RUN else 20_000
PER_TRANSACTION = 500
LIVE_RATE = 500  # transitions per second, all writers together
LIVE_SECONDS = 2 if QUICK_RUN else 8
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


def catch_up(url: str) -> float:
    with actae.open(url) as store:
        build_backlog(store, BACKLOG)
        projector = store.projector(batch_size=2000)
        start = time.perf_counter()
        count = projector.catch_up()
        return count / (time.perf_counter() - start)


def gaps_or_reorders(arrivals: list[Key]) -> int:
    """Events that did not arrive one cursor after the previous one of their channel."""
    last: dict[uuid.UUID, int] = {}
    wrong = 0
    for channel, cursor in arrivals:
        if channel in last and cursor != last[channel] + 1:
            wrong += 1
        last[channel] = cursor
    return wrong


def follower(args: list[str], into: dict[Key, float], order: list[Key] | None = None) -> Any:
    """A follower in a process of its own (``python -m benchmarks.projections ARGS``).

    It prints ``ready`` once it follows, then ``channel cursor seen_at`` for every event it
    sees; a thread here records each line into ``into`` (and the arrival order into
    ``order``). Returns the process, to be terminated.
    """
    worker = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.projections", *args], stdout=subprocess.PIPE, text=True
    )
    assert worker.stdout is not None
    assert worker.stdout.readline().strip() == "ready"

    def read() -> None:
        assert worker.stdout is not None
        for line in worker.stdout:
            channel, cursor, at = line.split()
            key = (uuid.UUID(channel), int(cursor))
            if key not in into:
                into[key] = float(at)
                if order is not None:
                    order.append(key)

    threading.Thread(target=read, daemon=True).start()
    return worker


@contextmanager
def foreign_transactions(dsn: str, schema: str) -> Iterator[None]:
    """Transactions of other clients held open: in another database, and one here.

    The one here is an operator's or ``pg_dump``'s: it took a transaction id, read every
    table and sequence of the store (holding their locks) and wrote a table of its own.
    A reader bounded by the cluster's oldest transaction would wait for them to end.
    """
    other = psycopg.conninfo.make_conninfo(dsn, dbname="postgres")
    with psycopg.connect(other) as elsewhere, psycopg.connect(dsn) as analyst:
        elsewhere.execute("SELECT pg_current_xact_id()")
        analyst.execute("SELECT pg_current_xact_id()")
        for kind in ("tables", "sequences"):
            names = analyst.execute(
                sql.SQL("SELECT {} FROM {} WHERE schemaname = %s").format(
                    sql.Identifier(kind[:-1] + "name"), sql.Identifier("pg_" + kind)
                ),
                (schema,),
            ).fetchall()
            for (name,) in names:
                what = "count(*)" if kind == "tables" else "last_value"
                analyst.execute(
                    sql.SQL("SELECT " + what + " FROM {}").format(sql.Identifier(schema, name))
                )
        analyst.execute("CREATE TEMP TABLE notes (n int)")
        analyst.execute("INSERT INTO notes VALUES (1)")
        try:
            yield
        finally:
            elsewhere.rollback()
            analyst.rollback()


def live_lag(url: str, foreign: tuple[str, str] | None = None) -> dict[str, Any]:
    """Writers at ``LIVE_RATE``; the projector and a subscriber follow, each in its process.

    The writers are threads of this process; neither follower is, so neither is woken by
    their commits: both find new events by their backoff's looks
    (``adapters/readside/subscription.py``), the case of every projector and every
    subscriber of another process. With ``foreign`` (a DSN and the store's schema), other
    clients' transactions are held open throughout (``foreign_transactions``).
    """
    with ExitStack() as stack, actae.open(url) as store:
        runs = [store.start_run(f"live-{i}", agent_id="a", state={"n": 0}) for i in range(WRITERS)]
        store.projector(batch_size=2000).catch_up()
        written: dict[Key, float] = {}
        projected: dict[Key, float] = {}
        delivered: dict[Key, float] = {}
        arrivals: list[Key] = []
        workers = [
            follower(["--projector-worker", url], projected),
            follower(["--subscriber-worker", url, str(store.position())], delivered, arrivals),
        ]
        if foreign is not None:
            stack.enter_context(foreign_transactions(*foreign))
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
        while not (written.keys() <= projected.keys() and written.keys() <= delivered.keys()):
            if time.monotonic() > deadline:
                break
            time.sleep(0.01)  # let the followers drain, bounded
        for worker in workers:
            worker.terminate()
            worker.wait()
    mine = {run.channel_id for run in runs}
    return {
        "asked_rate": LIVE_RATE,
        "write_rate": achieved,
        "projection_lag_ms": live_lags(written, projected),
        "subscription_lag_ms": live_lags(written, delivered),
        "samples": len(written),
        "delivered": len(written.keys() & delivered.keys()),
        "gaps_or_reorders": gaps_or_reorders([key for key in arrivals if key[0] in mine]),
    }


def subscriber_worker(url: str, after: int) -> None:
    """Subscribe after ``after`` and print ``channel cursor seen_at`` for every event."""
    with actae.open(url) as store:
        subscription = store.subscribe(after=after)
        signal.signal(signal.SIGTERM, lambda *_: subscription.stop())
        print("ready", flush=True)
        for event in subscription:
            sys.stdout.write(f"{event.channel_id} {event.cursor} {time.time()}\n")
            sys.stdout.flush()


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


def table(results: dict[str, Any]) -> str:
    """Markdown: catch-up, live lags and delivery, Actae beside raw psycopg."""
    lines = ["| backend | measure | Actae | raw psycopg | ratio |", "|---|---|---|---|---|"]
    for backend in ("sqlite", "postgresql"):
        if backend not in results:
            continue
        data = results[backend]
        ours, raw = data["catch_up_per_s"], data.get("raw_catch_up_per_s")
        lines.append(
            f"| {backend} | projection catch-up, events/s | {ours:,.0f} | "
            + (f"{raw:,.0f} | {ours / raw:.0%} |" if raw else "- | - |")
        )
        live, raw_live = data["live"], data.get("raw_live")
        rate = f"at {live['write_rate']:,.0f} transitions/s, {WRITERS} writers"
        for name, key in (
            ("projection", "projection_lag_ms"),
            ("subscription", "subscription_lag_ms"),
        ):
            for q in ("p50", "p99"):
                a = live[key][q]
                r = raw_live[key][q] if raw_live else None
                lines.append(
                    f"| {backend} | live {name} lag {q} ms {rate} | {a:.1f} | "
                    + (f"{r:.1f} | {a / r:.1f}x |" if r else "- | - |")
                )
        foreign = data.get("foreign")
        if foreign:
            for q in ("p50", "p99"):
                lines.append(
                    f"| {backend} | subscription lag {q} ms, foreign transactions open, at "
                    f"{foreign['write_rate']:,.0f} transitions/s | "
                    f"{foreign['subscription_lag_ms'][q]:.1f} | - | - |"
                )
        lines.append(
            f"| {backend} | subscription: delivered of written, gaps or reorders | "
            f"{live['delivered']:,} of {live['samples']:,}, {live['gaps_or_reorders']} | "
            + (
                f"{raw_live['delivered']:,} of {raw_live['samples']:,} | - |"
                if raw_live
                else "- | - |"
            )
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--projector-worker", metavar="URL")
    parser.add_argument("--subscriber-worker", nargs=2, metavar=("URL", "AFTER"))
    parser.add_argument("--dsn", default=DSN)
    parser.add_argument(
        "--sqlite", action="store_true", help="also measure SQLite (there is no raw baseline)"
    )
    parser.add_argument("--sqlite-only", action="store_true")
    args = parser.parse_args()
    if args.projector_worker:
        projector_worker(args.projector_worker)
        return
    if args.subscriber_worker:
        subscriber_worker(args.subscriber_worker[0], int(args.subscriber_worker[1]))
        return
    results: dict[str, Any] = {"date": datetime.now(UTC).isoformat(timespec="seconds")}
    if args.sqlite or args.sqlite_only:
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
                "raw_catch_up_per_s": raw_catch_up(args.dsn, BACKLOG),
            }
            progress("PostgreSQL: live lag")
            results["postgresql"]["live"] = live_lag(url + "b")
            progress("PostgreSQL: live lag with foreign transactions open")
            results["postgresql"]["foreign"] = live_lag(url + "c", (args.dsn, schema + "c"))
            progress("PostgreSQL: raw live lag")
            results["postgresql"]["raw_live"] = RawLive(
                args.dsn, writers=WRITERS, rate=LIVE_RATE, seconds=LIVE_SECONDS
            ).run()
        finally:
            with psycopg.connect(args.dsn, autocommit=True) as conn:
                for name in (schema + "a", schema + "b", schema + "c"):
                    conn.execute(
                        sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name))
                    )
    save("projections", results)
    print(f"\nActae read-side benchmark, {results['date']}\n")
    print(table(results))


if __name__ == "__main__":
    main()
