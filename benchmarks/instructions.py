"""Client instructions per operation, Actae ÷ raw, counted by callgrind.

Time on a shared VM drifts by a factor of two; the number of instructions the client
executes does not. Each measured side runs in a fresh Python process under ``valgrind
--tool=callgrind`` twice, once doing ``N`` operations and once ``2N`` after the same
set-up; the difference of the two totals divided by ``N`` is the cost of one operation,
start-up and set-up cancelled. What each process reads or writes beforehand (the runs to
claim on, the backlog to catch up) is prepared outside valgrind, so set-up is identical.
Only the client is counted (every thread of the Python process); the server is not.

- transition: ``Store.transition`` with the README's ~2 KB state and an operation id, beside
  ``RawBaseline``'s autocommitted INSERT of the same row (``benchmarks/raw.py``);
- claim: ``Store.claim`` of a fresh key on a run of its own, beside the raw ledger's upsert
  (``benchmarks/ledger.py``);
- catch-up: the projector reading a backlog of events into the read models, beside the raw
  catch-up (a SELECT per batch, one upsert per channel and the position).

Run with ``make bench`` or ``python -m benchmarks.instructions [--dsn DSN] [--count N]
[--only NAME]``; results go to ``benchmarks/results/instructions.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

import actae
from benchmarks.common import (
    DSN,
    QUICK_RUN,
    STATE,
    drop_schemas,
    progress,
    save,
    stamp,
    with_schema,
)
from benchmarks.ledger import raw_job
from benchmarks.projections import build_backlog
from benchmarks.raw import RawBaseline, raw_catch_up_loop, raw_catch_up_schema

COUNTS = {"transition": 50, "claim": 50, "catch-up": 2000}
"""``N`` per operation: enough that ``N`` operations dwarf the noise of start-up."""
QUICK_COUNTS = {"transition": 10}
"""A quick run (``ACTAE_BENCH_QUICK=1``) counts the transition only: each valgrind run costs
minutes of start-up whatever ``N``."""


# -- what runs under valgrind -----------------------------------------------------------------


def actae_transitions(url: str, count: int) -> None:
    with actae.open(url) as store:
        run = store.start_run(f"ir-{uuid.uuid4()}", agent_id="bench", state=STATE)
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


def raw_transitions(dsn: str, schema: str, count: int) -> None:
    raw = RawBaseline(dsn, schema, create=False)
    with psycopg.connect(dsn, autocommit=True) as conn:
        raw.transitions(conn, uuid.uuid4(), count)


def actae_claims(url: str, count: int, runs: list[str]) -> None:
    with actae.open(url) as store:
        for n in range(count):
            store.claim(f"{runs[n]}:{n}", run_id=runs[n], worker="w", lease=30.0, request={"n": n})


def raw_claims(dsn: str, schema: str, count: int) -> None:
    table = sql.SQL("{}.effects").format(sql.Identifier(schema))
    claim = raw_job(dsn, table, complete=False, count=count)
    claim(0, _Sink(), _Sink())


def actae_catch_up(url: str) -> None:
    with actae.open(url) as store:
        store.projector(batch_size=2000).catch_up()


class _Sink:
    """``raw_job``'s barrier and queue when no parent process waits or listens."""

    def wait(self) -> None:
        """Nobody to wait for."""

    def put(self, item: object) -> None:
        """Nobody to tell."""
        del item


def worker(args: list[str]) -> None:
    """The process valgrind runs: one side of one operation, as prepared by the parent."""
    name, side, target, count, extra = args[0], args[1], args[2], int(args[3]), args[4:]
    jobs: dict[tuple[str, str], Callable[[], None]] = {
        ("transition", "actae"): lambda: actae_transitions(target, count),
        ("transition", "raw"): lambda: raw_transitions(target, extra[0], count),
        ("claim", "actae"): lambda: actae_claims(target, count, json.loads(extra[0])),
        ("claim", "raw"): lambda: raw_claims(target, extra[0], count),
        ("catch-up", "actae"): lambda: actae_catch_up(target),
        ("catch-up", "raw"): lambda: raw_catch_up_loop(target, extra[0]),
    }
    jobs[name, side]()


# -- the parent: prepare, count twice, subtract ---------------------------------------------


def instructions(argv: list[str]) -> int:
    """The client's total instruction count for ``python -m benchmarks.instructions argv``."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "callgrind.out"
        command = [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={out}",
            sys.executable,
            "-m",
            "benchmarks.instructions",
            "--worker",
            *argv,
        ]
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        done = subprocess.run(command, check=False, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"callgrind run {argv} failed:\n{done.stderr[-3000:]}")
        for line in out.read_text().splitlines():
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise RuntimeError(f"callgrind wrote no total for {argv}")


def per_operation(name: str, side: str, count: int, prepare: Callable[[int], list[str]]) -> float:
    """Instructions of one operation: (total at ``2·count`` minus total at ``count``) / ``count``.

    ``prepare(n)`` makes what ``n`` operations work on and returns the process's target
    (a URL or DSN) and any further arguments.
    """
    totals = []
    for n in (count, 2 * count):
        target, *extra = prepare(n)
        progress(f"callgrind: {name}, {side}, {n:,} operations")
        totals.append(instructions([name, side, target, str(n), *extra]))
        progress(f"callgrind: {name}, {side}, {n:,} operations: {totals[-1]:,} instructions")
    return (totals[1] - totals[0]) / count


class Prepared:
    """The schemas each counted process works in, made beforehand and dropped afterwards."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.schemas: list[str] = []

    def schema(self, prefix: str) -> str:
        """A new schema name, dropped afterwards."""
        name = f"bench_ir_{prefix}_{uuid.uuid4().hex[:8]}"
        self.schemas.append(name)
        return name

    def store(self, prefix: str) -> str:
        """A new Actae store's URL, its schema created outside valgrind."""
        url = with_schema(self.dsn, self.schema(prefix))
        with actae.open(url):
            pass  # the schema exists before valgrind starts
        return url

    def transition(self, side: str) -> Callable[[int], list[str]]:
        """What a transition process needs: a store, or the raw events table."""
        if side == "actae":
            return lambda _n: [self.store("tr")]
        schema = self.schema("trraw")
        RawBaseline(self.dsn, schema)
        return lambda _n: [self.dsn, schema]

    def claim(self, side: str) -> Callable[[int], list[str]]:
        """What a claim process needs: a store with a run per claim, or the raw table."""
        if side == "actae":

            def runs(n: int) -> list[str]:
                url = self.store("cl")
                with actae.open(url) as store:
                    ids = [
                        str(store.start_run(f"ir-{i}", agent_id="bench", state={}).run_id)
                        for i in range(n)
                    ]
                return [url, json.dumps(ids)]

            return runs
        schema = self.schema("clraw")
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
            conn.execute(
                sql.SQL(
                    "CREATE TABLE {}.effects (key text PRIMARY KEY, holder text, token int, "
                    "expires_at timestamptz, request jsonb, result jsonb)"
                ).format(sql.Identifier(schema))
            )
        return lambda _n: [self.dsn, schema]

    def catch_up(self, side: str) -> Callable[[int], list[str]]:
        """What a catch-up process needs: a backlog of ``n`` events on either side."""
        made: dict[int, list[str]] = {}

        def backlog(n: int) -> list[str]:
            if n not in made:
                if side == "actae":
                    url = self.store("cu")
                    with actae.open(url) as store:
                        build_backlog(store, n)
                    made[n] = [url]
                else:
                    schema = self.schema("curaw")
                    raw_catch_up_schema(self.dsn, schema, n)
                    made[n] = [self.dsn, schema]
            return made[n]

        return backlog

    def drop(self) -> None:
        """Drop every schema made."""
        drop_schemas(self.dsn, *self.schemas)


def measure(dsn: str, counts: dict[str, int]) -> dict[str, Any]:
    prepared = Prepared(dsn)
    makers = {
        "transition": prepared.transition,
        "claim": prepared.claim,
        "catch-up": prepared.catch_up,
    }
    out: dict[str, Any] = {}
    try:
        for name, count in counts.items():
            ours = per_operation(name, "actae", count, makers[name]("actae"))
            raw = per_operation(name, "raw", count, makers[name]("raw"))
            out[name] = {"count": count, "actae": ours, "raw": raw, "ratio": ours / raw}
    finally:
        prepared.drop()
    return out


TARGETS = {"transition": 1.5}
"""The ratios issue 29 sets (docs/performance.md); the others are reported."""


def table(results: dict[str, Any]) -> str:
    lines = [
        "| client instructions per operation (callgrind) | Actae | raw | Actae ÷ raw | target |",
        "|---|---|---|---|---|",
    ]
    for name in COUNTS:
        if name not in results:
            continue
        row = results[name]
        target = TARGETS.get(name)
        goal = f"≤ {target}" if target else ""
        lines.append(
            f"| {name} (N = {row['count']:,}) | {row['actae']:,.0f} | {row['raw']:,.0f} "
            f"| {row['ratio']:.2f} | {goal} |"
        )
    return "\n".join(lines)


def main() -> None:
    if sys.argv[1:2] == ["--worker"]:
        worker(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dsn", default=DSN)
    parser.add_argument("--count", type=int, help="N for every operation")
    parser.add_argument("--only", choices=sorted(COUNTS), action="append")
    args = parser.parse_args()
    counts = {
        name: args.count or count
        for name, count in (QUICK_COUNTS if QUICK_RUN else COUNTS).items()
        if not args.only or name in args.only
    }
    results: dict[str, Any] = {**stamp(), **measure(args.dsn, counts)}
    save("instructions", results)
    print(f"\nActae client instructions, {results['date']}, {results['machine']}\n")
    print(table(results))


if __name__ == "__main__":
    main()
