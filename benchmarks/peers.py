"""Peers benchmark: one durable step in Actae, LangGraph and DBOS, on the same PostgreSQL.

Each system records the same ~2 KB state once per step, one client, one connection, with
the server's default durability (``synchronous_commit = on``) for all:

* **Actae**: ``store.transition`` (event + state version + operation record, one statement);
  and ``RunContext.step``, the worker API that, like a DBOS step, first looks for a recorded
  result (and checks that the run may go on) before it runs the function and records it.
* **LangGraph**: ``PostgresSaver.put`` (langgraph-checkpoint-postgres) of a checkpoint whose
  channel value is the state; the saver upserts a blob and a checkpoint row per put, as two
  autocommitted statements in one pipeline. A second row adds ``put_writes`` of the node's
  output first, which is what one superstep with one node saves under sync durability.
* **DBOS**: a ``@DBOS.step`` inside a ``@DBOS.workflow`` returning the state; DBOS records
  every step's output in its system database before the workflow goes on.
* **raw psycopg**: one ``INSERT`` of the state with a unique key (the floor).

Peers are optional: ``pip install -e '.[bench]'`` (``make bench`` does). A peer that is not
installed is reported as such, not measured. The peers take turns over three rounds and
the medians are reported. Run ``python -m benchmarks.peers [--dsn DSN]``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any

import orjson
import psycopg
from psycopg import sql

import actae
from benchmarks.common import (
    DSN,
    RESULTS,
    STATE,
    medians,
    progress,
    scratch_schema,
    summary,
    with_schema,
)
from benchmarks.core import ROUNDS, transition_step
from benchmarks.raw import RawBaseline

STEPS = 1000
WARMUP = 50


def timed(step: Callable[[int], object], count: int = STEPS) -> dict[str, Any]:
    """Steps per second and latency of ``count`` sequential calls, after a warm-up."""
    for n in range(WARMUP):
        step(-1 - n)
    timings = []
    start = time.perf_counter()
    for n in range(count):
        began = time.perf_counter()
        step(n)
        timings.append((time.perf_counter() - began) * 1000)
    return {"per_s": count / (time.perf_counter() - start), **summary(timings)}


def actae_steps(dsn: str) -> dict[str, Any]:
    with scratch_schema(dsn, "bench_peer") as schema, actae.open(with_schema(dsn, schema)) as store:
        run = store.start_run("peer", agent_id="bench", state=STATE)
        head: Any = run

        def step(n: int) -> object:
            nonlocal head
            head = transition_step(store, run, head, n)
            return head

        return timed(step)


def actae_context_steps(dsn: str) -> dict[str, Any]:
    with (
        scratch_schema(dsn, "bench_peer_ctx") as schema,
        actae.open(with_schema(dsn, schema)) as store,
    ):
        run = store.start_run("peer", agent_id="bench", state=STATE)
        context = store.resume(run.run_id, worker="bench")
        return timed(lambda n: context.step("call", lambda: {**STATE, "step": n}))


def raw_steps(dsn: str) -> dict[str, Any]:
    with scratch_schema(dsn, "bench_peer_raw") as schema:
        raw = RawBaseline(dsn, schema)
        insert = sql.SQL("INSERT INTO {} VALUES (%s, %s, %s, %s, %s, %s, %s, %s)").format(
            raw.table()
        )
        channel = uuid.uuid4()
        with psycopg.connect(dsn, autocommit=True) as conn:

            def step(n: int) -> object:
                state = orjson.dumps({**STATE, "step": n}).decode()
                key = f"{channel}:{n}"
                return conn.execute(insert, (channel, n, n, n, "step", "{}", state, key))

            return timed(step)


def langgraph_steps(dsn: str, *, with_writes: bool = False) -> dict[str, Any]:
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.postgres import PostgresSaver

    with scratch_schema(dsn, "bench_peer_lg") as schema:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        params = psycopg.conninfo.conninfo_to_dict(dsn)
        options = f"-c search_path={schema}"
        conninfo = psycopg.conninfo.make_conninfo("", **params, options=options)
        with PostgresSaver.from_conn_string(conninfo) as saver:
            saver.setup()
            config: Any = {"configurable": {"thread_id": str(uuid.uuid4()), "checkpoint_ns": ""}}
            config = saver.put(config, empty_checkpoint(), {"source": "input", "step": -1}, {})

            def step(n: int) -> object:
                nonlocal config
                state = {**STATE, "step": n}
                if with_writes:  # the node's output, saved as the task finishes
                    saver.put_writes(config, [("state", state)], task_id=str(uuid.uuid4()))
                checkpoint = empty_checkpoint()
                checkpoint["channel_values"] = {"state": state}
                checkpoint["channel_versions"] = {"state": n + WARMUP + 1}
                config = saver.put(
                    config, checkpoint, {"source": "loop", "step": n}, {"state": n + WARMUP + 1}
                )
                return config

            return timed(step)


def dbos_steps(dsn: str) -> dict[str, Any]:
    from dbos import DBOS

    database = f"bench_dbos_{uuid.uuid4().hex[:8]}"
    base = dsn.rsplit("/", 1)[0]
    DBOS(config={"name": "actae-bench", "system_database_url": f"{base}/{database}"})

    @DBOS.step()
    def step(n: int) -> dict[str, Any]:
        return {**STATE, "step": n}

    timings: list[float] = []

    @DBOS.workflow()
    def workflow(count: int) -> None:
        for n in range(count):
            began = time.perf_counter()
            step(n)
            timings.append((time.perf_counter() - began) * 1000)

    try:
        DBOS.launch()
        workflow(WARMUP)
        timings.clear()
        start = time.perf_counter()
        workflow(STEPS)
        elapsed = time.perf_counter() - start
        return {"per_s": STEPS / elapsed, **summary(timings)}
    finally:
        DBOS.destroy(destroy_registry=True)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database))
            )


PEERS: dict[str, Callable[[str], dict[str, Any]]] = {
    "Actae transition": actae_steps,
    "Actae RunContext.step": actae_context_steps,
    "LangGraph PostgresSaver.put": langgraph_steps,
    "LangGraph put_writes + put (one superstep)": partial(langgraph_steps, with_writes=True),
    "DBOS step": dbos_steps,
    "raw psycopg INSERT": raw_steps,
}


def table(results: dict[str, Any]) -> str:
    raw = results["peers"]["raw psycopg INSERT"]
    lines = [
        "| one durable step, ~2 KB state, 1 connection | steps/s | p50 ms | p99 ms "
        "| vs raw | vs Actae |",
        "|---|---|---|---|---|---|",
    ]
    ours = results["peers"]["Actae transition"]
    for name, data in results["peers"].items():
        if "missing" in data:
            lines.append(f"| {name} | not installed: {data['missing']} | | | | |")
            continue
        lines.append(
            f"| {name} | {data['per_s']:,.0f} | {data['p50_ms']:.2f} | {data['p99_ms']:.2f} | "
            f"{data['per_s'] / raw['per_s']:.0%} | {data['per_s'] / ours['per_s']:.2f}x |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dsn", default=DSN)
    args = parser.parse_args()
    os.environ.setdefault("DBOS__VMID", "actae-bench")
    results: dict[str, Any] = {"date": datetime.now(UTC).isoformat(timespec="seconds")}
    rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in PEERS}
    missing: dict[str, str] = {}
    for round_ in range(1, ROUNDS + 1):
        for name, measure in PEERS.items():
            if name in missing:
                continue
            progress(f"round {round_} of {ROUNDS}: {name}, {STEPS} steps")
            try:
                rounds[name].append(measure(args.dsn))
            except ImportError as error:
                missing[name] = str(error.name)
    results["peers"] = {
        name: {"missing": missing[name]} if name in missing else medians(rounds[name])
        for name in PEERS
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "peers.json").write_text(json.dumps(results, indent=2))
    print(f"\nActae peers benchmark, {results['date']}, PostgreSQL\n")
    print(table(results))


if __name__ == "__main__":
    main()
