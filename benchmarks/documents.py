"""Where a large state should live: in its event row, or offloaded as an artifact.

A document (a state, a payload) whose JSON is larger than the URL's ``inline_max`` (default
256 KiB) leaves the event row for the artifact tables, named by its digest, so that the same
content is stored once. Offloading costs round trips (a pending marker, the chunks, the
name, the reference) and a verified read; keeping a document inline costs its bytes again
in every version that repeats it. This benchmark puts numbers on both, to show where the
default should be:

- **writes**: transitions per second with a JSON state of 16 KiB to 4 MiB (more sizes
  around the default, where the crossover is), on a store that keeps it inline
  (``inline_max`` above the size) and one that offloads it (``inline_max=1024``), on one
  connection each, taking turns (this VM's speed drifts).
  Every state differs from the one before (a counter), so nothing is deduplicated.
- **reads**: ``state_at`` per second at a random earlier cursor of the same channels.
- **bytes per version**: on disk (``pg_total_relation_size`` of the events and artifact
  tables) per transition, for those distinct states and for the *same* state written in
  consecutive transitions (the payload differs): inline stores every copy, offloaded stores
  one. Shown as written (dead rows included: autovacuum may not have run) and live (after
  ``VACUUM FULL``).

The states are hex digits, which no store compresses to nothing (``benchmarks/common.py``);
PostgreSQL still tries (pglz, on the event row's body; artifact chunks are stored
uncompressed), and that attempt is part of what an inline document costs.

Run with ``python -m benchmarks.documents [--dsn DSN] [--no-sqlite] [--quick]``; results go
to ``benchmarks/results/documents.json``.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from functools import partial
from typing import Any

import psycopg
from psycopg import sql

import actae
from actae.adapters.persistence.url import DEFAULT_INLINE_MAX, MAX_INLINE_MAX, MIN_INLINE_MAX
from benchmarks.common import (
    DSN,
    drop_schemas,
    progress,
    save,
    stamp,
    summary,
    timings_ms,
    with_schema,
)
from benchmarks.core import Turns

KIB, MIB = 1024, 1024 * 1024
SIZES = (16 * KIB, 64 * KIB, 128 * KIB, 256 * KIB, 512 * KIB, MIB, 4 * MIB)
TURN_BYTES = 8 * MIB
"""State bytes each side writes (and reads) per turn: few turns of big states, many small."""
ROUNDS = 8
SAME_VERSIONS = 8
"""Consecutive transitions with the same state, for the bytes per version."""
SIDES = ("inline", "offloaded")
STORAGE_TABLES = ("actae_events", "actae_artifacts", "actae_artifact_chunks", "actae_artifact_refs")


def per_turn(size: int) -> int:
    return max(2, min(40, TURN_BYTES // size))


def document(size: int, seed: int = 0) -> dict[str, Any]:
    """A JSON state of about ``size`` bytes: hex digits, and a counter at ``state["n"]``."""
    return {"n": 0, "text": random.Random(seed).randbytes(size // 2 - 16).hex()}  # noqa: S311


def side_url(base: str, side: str) -> str:
    """The store URL of one side: ``inline_max`` above every size, or the least allowed."""
    limit = MAX_INLINE_MAX if side == "inline" else MIN_INLINE_MAX
    return f"{base}{'&' if '?' in base else '?'}inline_max={limit}"


# -- bytes on disk ----------------------------------------------------------------------------


def table_bytes(dsn: str, schema: str, tables: tuple[str, ...] | None = None) -> dict[str, int]:
    """``pg_total_relation_size`` of each table of ``schema`` (or of ``tables`` in it)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind = 'r' ORDER BY c.relname",
            (schema,),
        ).fetchall()
    return {name: int(size) for name, size in rows if tables is None or name in tables}


def vacuum_full(dsn: str, schema: str, wait: float = 30.0) -> bool:
    """Rewrite every table of ``schema`` without its dead rows (autovacuum may be off).

    A transaction open elsewhere in the database since before this call may still see rows
    deleted meanwhile, and ``VACUUM FULL`` keeps those: it waits up to ``wait`` seconds for
    such transactions to end. Whether none was left.
    """
    with psycopg.connect(dsn, autocommit=True) as conn:
        older = (
            "SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
            "AND datname = current_database() AND backend_xmin IS NOT NULL AND xact_start < %s"
        )
        row = conn.execute("SELECT statement_timestamp()").fetchone()
        since = row[0] if row else None
        deadline = time.monotonic() + wait
        while (found := conn.execute(older, (since,)).fetchone()) and found[0]:
            if time.monotonic() > deadline:
                break
            time.sleep(0.2)
        settled = not (found and found[0])
        for name in table_bytes(dsn, schema):
            conn.execute(sql.SQL("VACUUM FULL {}").format(sql.Identifier(schema, name)))
    return settled


# -- one side: a store and a channel ----------------------------------------------------------


class Side:
    """One store, one run whose channel gets the transitions; its head as last written."""

    def __init__(self, store: actae.Store) -> None:
        self.store = store
        self.run = store.start_run(f"docs-{uuid.uuid4()}", agent_id="bench", state={"n": 0})
        self.head = store.head(self.run.channel_id)
        self.cursors: list[int] = []

    def write(self, state: dict[str, Any], count: int, first: int) -> list[float]:
        """``count`` transitions of ``state``; latencies in ms.

        A state with a counter ``n`` gets ``first``, ``first + 1``, …: each version differs.
        """

        def one(n: int) -> None:
            self.head = self.store.transition(
                self.run.channel_id,
                kind="step",
                payload={"n": n},
                state={**state, "n": n} if "n" in state else state,
                expected_version=self.head.state_version,
                expected_cursor=self.head.cursor,
            )
            self.cursors.append(self.head.cursor)

        return timings_ms(one, range(first, first + count))

    def read(self, count: int, draw: random.Random) -> list[float]:
        """``count`` ``state_at`` at random cursors written so far; latencies in ms."""
        channel = self.run.channel_id
        return timings_ms(
            lambda _: self.store.state_at(channel, cursor=draw.choice(self.cursors)), range(count)
        )


@contextmanager
def opened(urls: dict[str, str]) -> Iterator[dict[str, actae.Store]]:
    with ExitStack() as stack:
        yield {side: stack.enter_context(actae.open(url)) for side, url in urls.items()}


def rates(
    urls: dict[str, str], sizes: tuple[int, ...], on_size: Callable[[int, str], None] | None
) -> dict[str, Any]:
    """Writes and reads per second, inline and offloaded by turns, for each size."""
    draw = random.Random(1)  # noqa: S311 - which cursors to read
    with opened(urls) as stores:
        return {str(size): one_size(stores, size, draw, on_size) for size in sizes}


def one_size(
    stores: dict[str, actae.Store],
    size: int,
    draw: random.Random,
    on_size: Callable[[int, str], None] | None,
) -> dict[str, Any]:
    """``ROUNDS`` rounds of write turns, then of read turns; the order flips every round."""
    progress(f"{size_label(size)} states: writes and reads, {ROUNDS} rounds of turns")
    state, count = document(size), per_turn(size)
    sides = {side: Side(stores[side]) for side in SIDES}
    writes = {side: Turns() for side in SIDES}
    reads = {side: Turns() for side in SIDES}
    for side in SIDES:  # one untimed transition each: pools and caches warm
        sides[side].write(state, 1, 0)
    if on_size is not None:
        on_size(size, "start")
    for round_ in range(ROUNDS):
        for side in SIDES if round_ % 2 == 0 else SIDES[::-1]:
            write = partial(sides[side].write, state, count, 1 + round_ * count)
            writes[side].take(count, write)
    if on_size is not None:
        on_size(size, "written")
    for round_ in range(ROUNDS):
        for side in SIDES if round_ % 2 == 0 else SIDES[::-1]:
            reads[side].take(count, partial(sides[side].read, count, draw))
    return {
        "transitions": ROUNDS * count,
        "write": {side: figures(writes[side]) for side in SIDES},
        "read": {side: figures(reads[side]) for side in SIDES},
    }


def figures(turns: Turns) -> dict[str, Any]:
    return {"per_s": turns.count / turns.elapsed, **summary(turns.timings)}


# -- PostgreSQL -------------------------------------------------------------------------------


def postgres(dsn: str, sizes: tuple[int, ...]) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:8]
    schemas = {side: f"bench_docs_{tag}_{side}" for side in SIDES}
    urls = {side: side_url(with_schema(dsn, schemas[side]), side) for side in SIDES}
    try:
        before: dict[str, int] = {}
        grown: dict[str, dict[str, int]] = {}

        def on_size(size: int, moment: str) -> None:
            totals = {
                side: sum(table_bytes(dsn, schemas[side], STORAGE_TABLES).values())
                for side in SIDES
            }
            if moment == "start":
                before.update(totals)
            else:
                grown[str(size)] = {side: totals[side] - before[side] for side in SIDES}

        out = rates(urls, sizes, on_size)
        for size in sizes:
            written = out[str(size)]["transitions"]
            out[str(size)]["bytes_distinct"] = {
                side: grown[str(size)][side] / written for side in SIDES
            }
        progress(f"bytes per version: the same state in {SAME_VERSIONS} consecutive transitions")
        for size in sizes:
            out[str(size)]["bytes_same"] = same_state_bytes(dsn, size)
        return out
    finally:
        drop_schemas(dsn, *schemas.values())


def same_state_bytes(dsn: str, size: int) -> dict[str, Any]:
    """Bytes per version of one state written ``SAME_VERSIONS`` times, as written and live."""
    tag = uuid.uuid4().hex[:8]
    schemas = {side: f"bench_docs_{tag}_same_{side}" for side in SIDES}
    urls = {side: side_url(with_schema(dsn, schemas[side]), side) for side in SIDES}
    try:
        state = document(size, seed=2)
        del state["n"]  # every version the same document
        out: dict[str, Any] = {}
        with opened(urls) as stores:
            sides = {side: Side(stores[side]) for side in SIDES}
            for side in SIDES:
                empty = sum(table_bytes(dsn, schemas[side], STORAGE_TABLES).values())
                sides[side].write(state, SAME_VERSIONS, 1)
                written = sum(table_bytes(dsn, schemas[side], STORAGE_TABLES).values())
                settled = vacuum_full(dsn, schemas[side])
                live = sum(table_bytes(dsn, schemas[side], STORAGE_TABLES).values())
                out[side] = {
                    "written": (written - empty) / SAME_VERSIONS,
                    "live": (live - empty) / SAME_VERSIONS,
                    "settled": settled,
                }
        return out
    finally:
        drop_schemas(dsn, *schemas.values())


# -- report -----------------------------------------------------------------------------------


def size_label(size: int) -> str:
    return f"{size // MIB} MiB" if size >= MIB else f"{size // KIB} KiB"


def kb_live_written(kept: dict[str, float]) -> str:
    return f"{kept['live'] / 1000:,.0f} ({kept['written'] / 1000:,.0f})"


def table(results: dict[str, Any]) -> str:
    lines = []
    for backend in ("postgresql", "sqlite"):
        if backend not in results:
            continue
        data = results[backend]
        pg = backend == "postgresql"
        head = "| state JSON | writes/s inline | offloaded | ratio | state_at/s inline | offloaded "
        head += "| ratio |"
        rule = "|---|---|---|---|---|---|---|"
        if pg:
            head += " KB/version, distinct states: inline / offloaded | KB/version, same state, "
            head += "live (as written): inline / offloaded |"
            rule += "---|---|"
        lines += [f"{'PostgreSQL' if pg else 'SQLite'}, one connection per side:", "", head, rule]
        for size in results["sizes"]:
            row = data[str(size)]
            w, r = row["write"], row["read"]
            cells = [
                size_label(size),
                f"{w['inline']['per_s']:,.1f}",
                f"{w['offloaded']['per_s']:,.1f}",
                f"{w['offloaded']['per_s'] / w['inline']['per_s']:.2f}x",
                f"{r['inline']['per_s']:,.1f}",
                f"{r['offloaded']['per_s']:,.1f}",
                f"{r['offloaded']['per_s'] / r['inline']['per_s']:.2f}x",
            ]
            if pg:
                d, s = row["bytes_distinct"], row["bytes_same"]
                cells.append(f"{d['inline'] / 1000:,.0f} / {d['offloaded'] / 1000:,.0f}")
                cells.append(" / ".join(kb_live_written(s[side]) for side in SIDES))
            lines.append(f"| {' | '.join(cells)} |")
        lines.append("")
    lines.append(
        f"ratio: offloaded ÷ inline (above 1: offloading is faster). The default inline_max is "
        f"{DEFAULT_INLINE_MAX // KIB} KiB; same state: {SAME_VERSIONS} consecutive versions."
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dsn", default=DSN)
    parser.add_argument("--no-sqlite", action="store_true", help="PostgreSQL only")
    parser.add_argument("--quick", action="store_true", help="16 KiB to 128 KiB only")
    args = parser.parse_args()
    sizes = SIZES[:4] if args.quick else SIZES
    results: dict[str, Any] = {
        **stamp(),
        "sizes": list(sizes),
        "rounds": ROUNDS,
    }
    progress("PostgreSQL")
    results["postgresql"] = postgres(args.dsn, sizes)
    if not args.no_sqlite:
        progress("SQLite")
        with tempfile.TemporaryDirectory() as folder:
            urls = {side: side_url(f"sqlite:///{folder}/{side}.db", side) for side in SIDES}
            results["sqlite"] = rates(urls, sizes, None)
    save("documents", results)
    print(f"\nActae documents benchmark, {results['date']}, {results['machine']}\n")
    print(table(results))


if __name__ == "__main__":
    main()
