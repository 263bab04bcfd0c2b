"""Peers benchmark: one durable step in Actae, LangGraph and DBOS, on the same PostgreSQL.

Each system records the same ~2 KB state once per step, one client, one connection, with
the server's default durability (``synchronous_commit = on``) for all:

* **Actae**: ``store.transition`` (event + state version, the event its operation record too,
  one row in one statement);
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
installed is reported as such, not measured. All peers are open at once and take turns of
100 steps, ten turns each, so that every peer meets the same moments of a machine whose
speed drifts. Run ``python -m benchmarks.peers [--dsn DSN]``.
"""

from __future__ import annotations

import argparse
import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from datetime import UTC, datetime
from functools import partial
from typing import Any

import orjson
import psycopg
from psycopg import sql

import actae
from benchmarks.common import (
    DSN,
    QUICK_RUN,
    STATE,
    progress,
    save,
    scratch_schema,
    timings_ms,
    with_schema,
)
from benchmarks.core import Turns, transition_step
from benchmarks.raw import RawBaseline

# every peer takes 10 turns of 100 steps, in rotation
TURN, TURNS = (20, 2) if QUICK_RUN else (100, 10)
WARMUP = 10 if QUICK_RUN else 50

Steps = Callable[[int, int], list[float]]
"""Runs ``count`` steps numbered from ``first``; returns their latencies in ms."""


def timed(step: Callable[[int], object]) -> Steps:
    """A peer's ``Steps`` from a function doing step ``n``."""
    return lambda first, count: timings_ms(step, range(first, first + count))


@contextmanager
def actae_steps(dsn: str) -> Iterator[Steps]:
    with scratch_schema(dsn, "bench_peer") as schema, actae.open(with_schema(dsn, schema)) as store:
        run = store.start_run("peer", agent_id="bench", state=STATE)
        head: Any = run

        def step(n: int) -> object:
            nonlocal head
            head = transition_step(store, run, head, n)
            return head

        yield timed(step)


@contextmanager
def actae_context_steps(dsn: str) -> Iterator[Steps]:
    with (
        scratch_schema(dsn, "bench_peer_ctx") as schema,
        actae.open(with_schema(dsn, schema)) as store,
    ):
        run = store.start_run("peer", agent_id="bench", state=STATE)
        context = store.resume(run.run_id, worker="bench")
        yield timed(lambda n: context.step("call", lambda: {**STATE, "step": n}))


@contextmanager
def raw_steps(dsn: str) -> Iterator[Steps]:
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

            yield timed(step)


@contextmanager
def langgraph_steps(dsn: str, *, with_writes: bool = False) -> Iterator[Steps]:
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
                version = n + WARMUP + 1  # increasing from the first warm-up step on
                if with_writes:  # the node's output, saved as the task finishes
                    saver.put_writes(config, [("state", state)], task_id=str(uuid.uuid4()))
                checkpoint = empty_checkpoint()
                checkpoint["channel_values"] = {"state": state}
                checkpoint["channel_versions"] = {"state": version}
                config = saver.put(
                    config, checkpoint, {"source": "loop", "step": n}, {"state": version}
                )
                return config

            yield timed(step)


@contextmanager
def dbos_steps(dsn: str) -> Iterator[Steps]:
    from dbos import DBOS

    database = f"bench_dbos_{uuid.uuid4().hex[:8]}"
    base = dsn.rsplit("/", 1)[0]
    DBOS(config={"name": "actae-bench", "system_database_url": f"{base}/{database}"})

    @DBOS.step()
    def step(n: int) -> dict[str, Any]:
        return {**STATE, "step": n}

    @DBOS.workflow()
    def workflow(first: int, count: int) -> list[float]:
        return timings_ms(step, range(first, first + count))

    try:
        DBOS.launch()
        yield workflow  # one workflow per turn: its steps are recorded in order
    finally:
        DBOS.destroy(destroy_registry=True)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database))
            )


PEERS: dict[str, Callable[[str], AbstractContextManager[Steps]]] = {
    "Actae transition": actae_steps,
    "Actae RunContext.step": actae_context_steps,
    "LangGraph PostgresSaver.put": langgraph_steps,
    "LangGraph put_writes + put (one superstep)": partial(langgraph_steps, with_writes=True),
    "DBOS step": dbos_steps,
    "raw psycopg INSERT": raw_steps,
}


def measure(dsn: str) -> dict[str, Any]:
    """Every installed peer, taking turns; a peer that is not installed is reported as such."""
    missing: dict[str, str] = {}
    with ExitStack() as stack:
        runners: dict[str, Steps] = {}
        for name, open_peer in PEERS.items():
            try:
                runners[name] = stack.enter_context(open_peer(dsn))
            except ImportError as error:
                missing[name] = str(error.name)
                continue
            runners[name](-WARMUP, WARMUP)
        sides = {name: Turns() for name in runners}
        for turn in range(TURNS):
            progress(f"turn {turn + 1} of {TURNS}: {TURN} steps of each peer")
            for name, steps in runners.items():
                sides[name].take(TURN, partial(steps, turn * TURN, TURN))
    figures = {name: side.figures() for name, side in sides.items()}
    return {
        name: {"missing": missing[name]}
        if name in missing
        else {"per_s": figures[name]["per_s"], **figures[name]["latency"]}
        for name in PEERS
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
    results["peers"] = measure(args.dsn)
    save("peers", results)
    print(f"\nActae peers benchmark, {results['date']}, PostgreSQL\n")
    print(table(results))


if __name__ == "__main__":
    main()
