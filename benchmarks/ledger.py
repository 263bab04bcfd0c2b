"""Ledger benchmark: claims per second on PostgreSQL from 4 worker processes, beside raw psycopg.

Each worker process claims effects with fresh keys of its own runs (a claim reads nothing:
it registers the effect, grants the claim and notes it on the run's channel, one
statement); with ``claim+complete`` it then completes each (one statement: the process
decides on what its claim wrote, ``domain/known_effects.py``). The raw baseline does the
same job in one statement per call: an ``INSERT ... ON CONFLICT DO UPDATE ... WHERE lease
expired`` per claim and an ``UPDATE ... WHERE token`` per completion.

Processes, not threads (a worker fleet runs a process per core), and the two sides take
turns over three rounds (this VM's speed drifts): the medians are reported. Run with
``python -m benchmarks.ledger [--dsn DSN]``; results go to ``benchmarks/results/ledger.json``.
"""

from __future__ import annotations

import argparse
import json
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import sql

import actae
from benchmarks.common import DSN, QUICK_RUN, medians, progress, save
from benchmarks.core import in_processes

WORKERS = 4
CLAIMS_PER_WORKER = 40 if QUICK_RUN else 400
RUNS_PER_WORKER = 40
"""Each worker's claims go round its runs: without completions, a run ends with 10 open
effects, whose keys every note on its channel carries (an agent's pending tool calls)."""
ROUNDS = 1 if QUICK_RUN else 3
LABELS = ("claim", "claim+complete")


def actae_job(url: str, complete: bool) -> Callable[..., None]:
    """A worker process: opens its store and run, then claims (and completes) its keys."""

    def job(index: int, ready: Any, out: Any) -> None:
        with actae.open(url) as store:
            runs = [
                store.start_run(f"ledger-{uuid.uuid4()}", agent_id="bench", state={}).run_id
                for _ in range(RUNS_PER_WORKER)
            ]
            worker = f"w{index}"
            ready.wait()
            for n in range(CLAIMS_PER_WORKER):
                run_id = runs[n % RUNS_PER_WORKER]
                key = f"{run_id}:{n}"
                claim = store.claim(
                    key, run_id=run_id, worker=worker, lease=30.0, request={"amount": n}
                )
                if complete:
                    store.complete_effect(
                        key, token=claim.token, worker=worker, result={"ok": True}
                    )
        out.put([])

    return job


def raw_job(
    dsn: str, table: sql.Composed, complete: bool, count: int = CLAIMS_PER_WORKER
) -> Callable[..., None]:
    """The same work in plain psycopg: one upsert per claim, one update per completion."""
    claim = sql.SQL(
        "INSERT INTO {} AS e (key, holder, token, expires_at, request) "
        "VALUES (%s, %s, 1, now() + interval '30 seconds', %s) "
        "ON CONFLICT (key) DO UPDATE SET holder = excluded.holder, token = e.token + 1, "
        "expires_at = excluded.expires_at WHERE e.expires_at < now() AND e.result IS NULL "
        "RETURNING token"
    ).format(table)
    done = sql.SQL("UPDATE {} SET result = %s WHERE key = %s AND token = %s").format(table)

    def job(index: int, ready: Any, out: Any) -> None:
        prefix = uuid.uuid4()
        with psycopg.connect(dsn, autocommit=True) as conn:
            ready.wait()
            for n in range(count):
                key = f"{prefix}:{n}"
                row = conn.execute(claim, (key, f"w{index}", json.dumps({"amount": n})))
                token = row.fetchone()
                if complete and token is not None:
                    conn.execute(done, ('{"ok": true}', key, token[0]))
        out.put([])

    return job


def measure(dsn: str, schema: str, table: sql.Composed) -> dict[str, Any]:
    """Both sides, both labels, taking turns over the rounds; per-round rates."""
    url = f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}"
    with actae.open(url):
        pass  # creates the schema once; no store is open while client processes fork
    rounds = []
    for round_ in range(1, ROUNDS + 1):
        figures: dict[str, Any] = {}
        for label in LABELS:
            complete = label == "claim+complete"
            progress(f"round {round_} of {ROUNDS}, {label}: Actae then raw, {WORKERS} processes")
            ours, _ = in_processes(actae_job(url, complete), WORKERS, CLAIMS_PER_WORKER)
            raw, _ = in_processes(raw_job(dsn, table, complete), WORKERS, CLAIMS_PER_WORKER)
            figures[label] = {"actae_per_s": ours, "raw_per_s": raw, "ratio": ours / raw}
        rounds.append(figures)
    return {"rounds": rounds, **medians(rounds)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dsn", default=DSN)
    args = parser.parse_args()
    schema = f"bench_ledger_{uuid.uuid4().hex[:8]}"
    table = sql.SQL("{}.effects").format(sql.Identifier(f"{schema}_raw"))
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(f"{schema}_raw")))
        conn.execute(
            sql.SQL(
                "CREATE TABLE {} (key text PRIMARY KEY, holder text, token int, "
                "expires_at timestamptz, request jsonb, result jsonb)"
            ).format(table)
        )
    results: dict[str, Any] = {"date": datetime.now(UTC).isoformat(timespec="seconds")}
    try:
        results |= measure(args.dsn, schema, table)
    finally:
        with psycopg.connect(args.dsn, autocommit=True) as conn:
            for name in (schema, f"{schema}_raw"):
                conn.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name))
                )
    save("ledger", results)
    print(f"\nActae ledger benchmark, {results['date']}, PostgreSQL, {WORKERS} processes")
    print(f"(medians of {ROUNDS} interleaved rounds)\n")
    print("| per second | Actae | raw psycopg | ratio |\n|---|---|---|---|")
    for label in LABELS:
        ours, raw = results[label]["actae_per_s"], results[label]["raw_per_s"]
        print(f"| {label} | {ours:,.0f} | {raw:,.0f} | {results[label]['ratio']:.0%} |")


if __name__ == "__main__":
    main()
