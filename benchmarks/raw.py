"""The raw baselines: the same work as Actae with plain psycopg (or sqlite3), no library.

Every Actae figure in ``make bench`` is printed beside one of these, measured in the same
run. Each does what the corresponding Actae operation needs and nothing more: one table, one
statement per operation, the same indexes and the same ordering guarantee where Actae gives
one (see ``RawLive``).
"""

from __future__ import annotations

import sqlite3
import threading
import time
import uuid
from collections.abc import Callable
from functools import partial
from typing import Any

import orjson
import psycopg
from psycopg import sql

from benchmarks.common import STATE, Key, latency, live_lags


class RawBaseline:
    """The same work with plain psycopg: one table, one statement per operation."""

    def __init__(self, dsn: str, schema: str, *, create: bool = True) -> None:
        self.dsn, self.schema = dsn, schema
        if not create:
            return
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
            conn.execute(
                sql.SQL(
                    "CREATE TABLE {} (channel_id uuid, cursor bigint, state_version int, "
                    "state_cursor bigint, kind text, payload jsonb, state jsonb, "
                    "operation_id text UNIQUE, PRIMARY KEY (channel_id, cursor))"
                ).format(self.table())
            )

    def table(self) -> sql.Composed:
        """The baseline's single events table."""
        return sql.SQL("{}.events").format(sql.Identifier(self.schema))

    def transitions(
        self, conn: psycopg.Connection[Any], channel: uuid.UUID, count: int
    ) -> list[float]:
        """``count`` transitions, one autocommitted INSERT each; their latencies in ms."""
        insert = sql.SQL("INSERT INTO {} VALUES (%s, %s, %s, %s, %s, %s, %s, %s)").format(
            self.table()
        )
        timings = []
        for cursor in range(1, count + 1):
            start = time.perf_counter()
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
                    f"{channel}:{cursor}",
                ),
            )
            timings.append((time.perf_counter() - start) * 1000)
        return timings

    def fill(self, conn: psycopg.Connection[Any], channel: uuid.UUID, events: int) -> None:
        """A channel shaped like ``fill()``'s: a state every 50 events, 5 before the head."""
        conn.execute(
            sql.SQL(
                "INSERT INTO {} SELECT %s, g, 1, "
                "g - ((g - (%s - 5)) %% 50 + 50) %% 50, 'note', '{{\"n\": 1}}', "
                "CASE WHEN (%s - g) %% 50 = 5 THEN %s::jsonb END, NULL "
                "FROM generate_series(1, %s) g"
            ).format(self.table()),
            (channel, events, events, orjson.dumps(STATE).decode(), events),
        )

    def reads(self, conn: psycopg.Connection[Any], channel: uuid.UUID, size: int) -> dict[str, Any]:
        """Head, state at a cursor (event, then its state) and recover (that plus the tail)."""
        table = self.table()
        head = sql.SQL(
            "SELECT cursor, state_version, state_cursor FROM {} WHERE channel_id = %s "
            "ORDER BY cursor DESC LIMIT 1"
        ).format(table)
        at = sql.SQL("SELECT state_cursor FROM {} WHERE channel_id = %s AND cursor = %s").format(
            table
        )
        state = sql.SQL("SELECT state FROM {} WHERE channel_id = %s AND cursor = %s").format(table)
        tail = sql.SQL(
            "SELECT cursor, kind, payload FROM {} WHERE channel_id = %s AND cursor > %s "
            "ORDER BY cursor"
        ).format(table)

        def state_at(cursor: int) -> object:
            row = conn.execute(at, (channel, cursor)).fetchone()
            assert row is not None
            return conn.execute(state, (channel, row[0])).fetchone()

        def state_at_head() -> object:
            row = conn.execute(head, (channel,)).fetchone()
            assert row is not None
            return conn.execute(state, (channel, row[2])).fetchone()

        def recover() -> object:
            row = conn.execute(head, (channel,)).fetchone()
            assert row is not None
            conn.execute(state, (channel, row[2])).fetchone()
            return conn.execute(tail, (channel, row[2])).fetchall()

        return {
            "head": latency(lambda: conn.execute(head, (channel,)).fetchone()),
            "state_at_head": latency(state_at_head),
            "state_at_middle": latency(partial(state_at, size // 2 + 1)),
            "recover": latency(recover),
        }


def raw_read_latencies(raw: RawBaseline, sizes: tuple[int, ...]) -> dict[str, Any]:
    with psycopg.connect(raw.dsn, autocommit=True) as conn:
        channels = {size: uuid.uuid4() for size in sizes}
        for size, channel in channels.items():
            raw.fill(conn, channel, size)
        conn.execute(sql.SQL("ANALYZE {}").format(raw.table()))
        return {str(size): raw.reads(conn, channel, size) for size, channel in channels.items()}


def raw_sqlite_read_latencies(path: str, sizes: tuple[int, ...]) -> dict[str, Any]:
    """The raw reads on SQLite with the standard library's sqlite3: same table, same lookups."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute(
            "CREATE TABLE events (channel_id TEXT, cursor INTEGER, state_cursor INTEGER, "
            "kind TEXT, payload TEXT, state TEXT, PRIMARY KEY (channel_id, cursor))"
        )
        state = orjson.dumps(STATE).decode()
        out: dict[str, Any] = {}
        for size in sizes:
            channel = str(uuid.uuid4())
            conn.execute("BEGIN")
            conn.executemany(
                "INSERT INTO events VALUES (?, ?, ?, 'note', '{\"n\": 1}', ?)",
                (
                    (
                        channel,
                        g,
                        g - ((g - (size - 5)) % 50 + 50) % 50,
                        state if (size - g) % 50 == 5 else None,
                    )
                    for g in range(1, size + 1)
                ),
            )
            conn.execute("COMMIT")
            out[str(size)] = sqlite_reads(conn, channel, size)
        return out
    finally:
        conn.close()


def sqlite_reads(conn: sqlite3.Connection, channel: str, size: int) -> dict[str, Any]:
    """``RawBaseline.reads`` in SQLite's dialect."""
    head = (
        "SELECT cursor, state_cursor FROM events WHERE channel_id = ? ORDER BY cursor DESC LIMIT 1"
    )
    at = "SELECT state_cursor FROM events WHERE channel_id = ? AND cursor = ?"
    state = "SELECT state FROM events WHERE channel_id = ? AND cursor = ?"
    tail = (
        "SELECT cursor, kind, payload FROM events WHERE channel_id = ? AND cursor > ? "
        "ORDER BY cursor"
    )

    def state_at(cursor: int) -> object:
        row = conn.execute(at, (channel, cursor)).fetchone()
        return conn.execute(state, (channel, row[0])).fetchone()

    def state_at_head() -> object:
        row = conn.execute(head, (channel,)).fetchone()
        return conn.execute(state, (channel, row[1])).fetchone()

    def recover() -> object:
        row = conn.execute(head, (channel,)).fetchone()
        conn.execute(state, (channel, row[1])).fetchone()
        return conn.execute(tail, (channel, row[1])).fetchall()

    return {
        "head": latency(lambda: conn.execute(head, (channel,)).fetchone()),
        "state_at_head": latency(state_at_head),
        "state_at_middle": latency(partial(state_at, size // 2 + 1)),
        "recover": latency(recover),
    }


def raw_process(raw: RawBaseline, count: int) -> Callable[..., None]:
    def job(index: int, ready: Any, out: Any) -> None:
        with psycopg.connect(raw.dsn, autocommit=True) as conn:
            ready.wait()
            out.put(raw.transitions(conn, uuid.uuid4(), count))

    return job


def raw_catch_up_schema(dsn: str, schema: str, events: int) -> None:
    """The raw catch-up's tables in ``schema``: ``events`` rows over 20 channels to read."""
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
            (channels, events),
        )


def raw_catch_up_loop(dsn: str, schema: str) -> None:
    """Read every row in batches, upsert heads and the position, one transaction a batch."""
    ident = sql.Identifier(schema)
    select = sql.SQL(
        "SELECT id, channel, cursor, payload FROM {}.events WHERE id > %s ORDER BY id LIMIT 2000"
    ).format(ident)
    upsert = sql.SQL(
        "INSERT INTO {}.heads VALUES (%s, %s) ON CONFLICT (channel) "
        "DO UPDATE SET cursor = excluded.cursor"
    ).format(ident)
    track = sql.SQL("UPDATE {}.tracking SET position = %s").format(ident)
    with psycopg.connect(dsn, autocommit=True) as conn:
        position = 0
        while True:
            with conn.transaction():
                rows = conn.execute(select, (position,)).fetchall()
                if not rows:
                    break
                heads = {row[1]: row[2] for row in rows}
                with conn.cursor() as cursor:
                    cursor.executemany(upsert, list(heads.items()))
                position = rows[-1][0]
                conn.execute(track, (position,))


def raw_catch_up(dsn: str, events: int) -> float:
    """Rows per second: read ``events`` rows in batches, upsert heads and the position."""
    schema = f"bench_raw_{uuid.uuid4().hex[:8]}"
    raw_catch_up_schema(dsn, schema, events)
    start = time.perf_counter()
    raw_catch_up_loop(dsn, schema)
    elapsed = time.perf_counter() - start
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
    return events / elapsed


class RawLive:
    """The live run with plain psycopg, in its own schema.

    Writers INSERT and NOTIFY in one statement under an advisory lock, the simplest way to
    the guarantee Actae gives (its recorder reads up to a horizon instead,
    ``adapters/persistence/positions.py``): without either, concurrent writers commit
    positions out of order and a follower that reads ``id > last`` skips the late ones (a
    run without it delivered 4,000 of 4,004).
    A follower LISTENs, reads new rows in position order (subscription lag), then upserts
    one head per channel and its tracking position in one transaction (projection lag).
    """

    def __init__(self, dsn: str, *, writers: int, rate: float, seconds: float) -> None:
        self.dsn = dsn
        self.writers, self.rate, self.seconds = writers, rate, seconds
        self.schema = f"bench_rawlive_{uuid.uuid4().hex[:8]}"
        self.channel_name = f"{self.schema}_events"
        self.written: dict[Key, float] = {}
        self.projected: dict[Key, float] = {}
        self.delivered: dict[Key, float] = {}
        self.stop = threading.Event()
        self.listening = threading.Event()
        ident = sql.Identifier(self.schema)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(ident))
            for ddl in (
                "CREATE TABLE {}.events (id bigserial PRIMARY KEY, channel uuid, "
                "cursor bigint, state jsonb)",
                "CREATE TABLE {}.heads (channel uuid PRIMARY KEY, cursor bigint)",
                "CREATE TABLE {}.tracking (position bigint)",
                "INSERT INTO {}.tracking VALUES (0)",
            ):
                conn.execute(sql.SQL(ddl).format(ident))

    def follow(self) -> None:
        """Read, project and track every new row until stopped."""
        ident = sql.Identifier(self.schema)
        select = sql.SQL(
            "SELECT id, channel, cursor FROM {}.events WHERE id > %s ORDER BY id LIMIT 2000"
        ).format(ident)
        upsert = sql.SQL(
            "INSERT INTO {}.heads VALUES (%s, %s) ON CONFLICT (channel) "
            "DO UPDATE SET cursor = excluded.cursor"
        ).format(ident)
        track = sql.SQL("UPDATE {}.tracking SET position = %s").format(ident)
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel_name)))
            self.listening.set()
            position = 0
            while not self.stop.is_set():
                rows = conn.execute(select, (position,)).fetchall()
                if not rows:
                    for _ in conn.notifies(timeout=0.2, stop_after=1):
                        pass
                    continue
                seen = time.time()
                with conn.transaction(), conn.cursor() as cursor:
                    cursor.executemany(upsert, list({r[1]: r[2] for r in rows}.items()))
                    cursor.execute(track, (rows[-1][0],))
                done = time.time()
                for _, channel, cursor_ in rows:
                    self.delivered[(channel, cursor_)] = seen
                    self.projected[(channel, cursor_)] = done
                position = rows[-1][0]

    def write(self, channel: uuid.UUID) -> None:
        """Insert at this writer's share of ``rate`` for ``seconds``."""
        insert = sql.SQL(
            "WITH l AS MATERIALIZED (SELECT pg_advisory_xact_lock(hashtext(%s))), "
            "i AS (INSERT INTO {}.events (channel, cursor, state) "
            "SELECT %s, %s, %s FROM l RETURNING id) SELECT id, pg_notify(%s, '') FROM i"
        ).format(sql.Identifier(self.schema))
        interval = self.writers / self.rate
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            next_at = time.perf_counter()
            deadline = next_at + self.seconds
            cursor = 0
            while next_at < deadline:
                time.sleep(max(0.0, next_at - time.perf_counter()))  # pacing the load
                cursor += 1
                params = (self.schema, channel, cursor, '{"n": 1}', self.channel_name)
                conn.execute(insert, params).fetchall()
                self.written[(channel, cursor)] = time.time()
                next_at += interval

    def run(self) -> dict[str, Any]:
        """The whole live run; drops the schema afterwards."""
        follower = threading.Thread(target=self.follow, daemon=True)
        follower.start()
        self.listening.wait()
        writers = [
            threading.Thread(target=self.write, args=(uuid.uuid4(),)) for _ in range(self.writers)
        ]
        start = time.perf_counter()
        for writer in writers:
            writer.start()
        for writer in writers:
            writer.join()
        achieved = len(self.written) / (time.perf_counter() - start)
        deadline = time.monotonic() + 10
        while not self.written.keys() <= self.projected.keys() and time.monotonic() < deadline:
            time.sleep(0.01)  # let the follower drain, bounded
        self.stop.set()
        follower.join()
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(self.schema)))
        return {
            "write_rate": achieved,
            "projection_lag_ms": live_lags(self.written, self.projected),
            "subscription_lag_ms": live_lags(self.written, self.delivered),
            "samples": len(self.written),
            "delivered": len(self.written.keys() & self.delivered.keys()),
        }
