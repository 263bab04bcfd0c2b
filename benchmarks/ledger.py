"""Ledger benchmark: claims per second on PostgreSQL with 4 workers, beside raw psycopg.

Each worker claims effects with fresh keys (a claim is: read the effect, register it, save
the claim and its channel note in one transaction). The raw baseline does the same job in
one statement: an ``INSERT ... ON CONFLICT DO UPDATE ... WHERE lease expired`` per claim.
Run with ``python -m benchmarks.ledger [--dsn DSN]``; results go to
``benchmarks/results/ledger.json``.
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
from benchmarks.common import DSN, progress, rate, save

WORKERS = 4
CLAIMS_PER_WORKER = 400


def actae_claims(store: actae.Store, complete: bool) -> Callable[[int], None]:
    def run_one(index: int) -> None:
        run = store.start_run(f"ledger-{uuid.uuid4()}", agent_id="bench", state={})
        for n in range(CLAIMS_PER_WORKER):
            key = f"{run.run_id}:{n}"
            claim = store.claim(
                key, run_id=run.run_id, worker=f"w{index}", lease=30.0, request={"amount": n}
            )
            if complete:
                store.complete(key, token=claim.token, worker=f"w{index}", result={"ok": True})

    return run_one


def raw_claims(dsn: str, table: sql.Composed, complete: bool) -> Callable[[int], None]:
    claim = sql.SQL(
        "INSERT INTO {} AS e (key, holder, token, expires_at, request) "
        "VALUES (%s, %s, 1, now() + interval '30 seconds', %s) "
        "ON CONFLICT (key) DO UPDATE SET holder = excluded.holder, token = e.token + 1, "
        "expires_at = excluded.expires_at WHERE e.expires_at < now() AND e.result IS NULL "
        "RETURNING token"
    ).format(table)
    done = sql.SQL("UPDATE {} SET result = %s WHERE key = %s AND token = %s").format(table)

    def run_one(index: int) -> None:
        prefix = uuid.uuid4()
        with psycopg.connect(dsn, autocommit=True) as conn:
            for n in range(CLAIMS_PER_WORKER):
                key = f"{prefix}:{n}"
                row = conn.execute(claim, (key, f"w{index}", json.dumps({"amount": n})))
                token = row.fetchone()
                if complete and token is not None:
                    conn.execute(done, ('{"ok": true}', key, token[0]))

    return run_one


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
        url = f"{args.dsn}{'&' if '?' in args.dsn else '?'}schema={schema}&pool_size={WORKERS}"
        with actae.open(url) as store:
            for complete in (False, True):
                label = "claim+complete" if complete else "claim"
                progress(f"{label}: Actae, {WORKERS} workers")
                ours = rate(actae_claims(store, complete), WORKERS, CLAIMS_PER_WORKER)
                progress(f"{label}: raw psycopg, {WORKERS} workers")
                raw = rate(raw_claims(args.dsn, table, complete), WORKERS, CLAIMS_PER_WORKER)
                results[label] = {"actae_per_s": ours, "raw_per_s": raw}
    finally:
        with psycopg.connect(args.dsn, autocommit=True) as conn:
            for name in (schema, f"{schema}_raw"):
                conn.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name))
                )
    save("ledger", results)
    print(f"\nActae ledger benchmark, {results['date']}, PostgreSQL, {WORKERS} workers\n")
    print("| per second | Actae | raw psycopg | ratio |\n|---|---|---|---|")
    for label in ("claim", "claim+complete"):
        ours, raw = results[label]["actae_per_s"], results[label]["raw_per_s"]
        print(f"| {label} | {ours:,.0f} | {raw:,.0f} | {ours / raw:.0%} |")


if __name__ == "__main__":
    main()
