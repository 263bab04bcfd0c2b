"""Concurrency benchmark: Actae from asyncio, beside LangGraph's saver and the sync Store.

Two measurements on the same PostgreSQL, each a set of contenders that are all open at once
and take turns (so that every contender meets the same moments of a machine whose speed
drifts), each reported as ratios within the run:

1. **One LangGraph superstep**, the same calls through LangGraph's ``AsyncPostgresSaver``
   (langgraph-checkpoint-postgres, its tables made by ``setup()`` in a scratch schema that
   its connection's ``search_path`` names) and through Actae's ``AsyncActaeSaver``. A graph
   run with ``ainvoke`` (default durability, and ``"sync"`` alike) saves each superstep of
   one node as ``aput_writes`` of the node's output, then ``aput`` of the next checkpoint;
   the superstep here is exactly those two calls, with the ~2 KB state of the other
   benchmarks as the channel value and versions from each saver's ``get_next_version``.
   A second row runs a whole ``graph.ainvoke`` of a one-node ``StateGraph`` on a fresh
   thread through each saver: a ``get_tuple``, the input checkpoint, and two supersteps
   (``__start__`` and the node), 3 ``aput`` and 2 ``aput_writes``, plus LangGraph itself.
2. **Transitions from asyncio or from threads**: ``AsyncStore.transition`` from 32
   coroutines on one event loop beside ``Store.transition`` from 4 threads, one process
   each, the ~2 KB state and the transition step of ``benchmarks.core`` (each coroutine or
   thread drives its own run's channel and keeps its head). Both stores are on one scratch
   schema, with the same pool settings (5 connections kept, up to 15). Beside them, the raw
   baseline of ``benchmarks.raw`` (one autocommitted ``INSERT`` per transition) with the same
   concurrency: 32 coroutines on a psycopg ``AsyncConnectionPool`` of the same size, and 4
   threads with a connection each. Threads, not processes as in ``benchmarks.core``: the
   question is what an asyncio program gains over a thread pool in the same process, GIL
   included.

Client CPU per operation is the whole process's (its threads and the event loop's).
Run with ``python -m benchmarks.concurrency [--dsn DSN] [--quick]`` (part of ``make bench``);
results go to ``benchmarks/results/concurrency.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any, TypedDict

import orjson
import psycopg
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.graph import END, START, StateGraph
from psycopg import sql
from psycopg_pool import AsyncConnectionPool

import actae
from actae.langgraph import AsyncActaeSaver
from benchmarks.common import (
    DSN,
    QUICK_RUN,
    STATE,
    progress,
    save,
    scratch_schema,
    stamp,
    with_schema,
)
from benchmarks.core import Turns, transition_step
from benchmarks.loop_lag import atransition_step
from benchmarks.raw import RawBaseline


@dataclass(frozen=True)
class Sizes:
    """How much each contender does per turn, and how many turns."""

    turns: int
    supersteps: int  # per turn, one thread
    invokes: int  # per turn, a fresh thread each
    transitions: int  # per turn, split between the coroutines or the threads
    warmup: int


FULL = Sizes(turns=10, supersteps=150, invokes=30, transitions=960, warmup=20)
QUICK = Sizes(turns=4, supersteps=50, invokes=10, transitions=320, warmup=10)
COROUTINES, THREADS = 32, 4
POOL = "pool_size=5&max_overflow=10"  # Actae's defaults, pinned: 5 connections kept, up to 15
POOL_MIN, POOL_MAX = 5, 15  # the raw async pool, the same size
TASK_PATH = "~__pregel_pull, node"  # the task path LangGraph gives a node's writes

Turn = Callable[[int], list[float]]
"""Runs one contender's turn of ``count`` operations; returns their latencies in ms.

Each contender numbers its own operations, so that no operation id ever repeats (a repeated
one is replayed, not written)."""


def ms_since(start: float) -> float:
    return (time.perf_counter() - start) * 1000


def counted(step: Callable[[int], Awaitable[object]], runner: asyncio.Runner) -> Turn:
    """A ``Turn`` awaiting ``step(n)`` ``count`` times in a row, ``n`` counting on across turns."""
    numbers = itertools.count()

    async def turn(count: int) -> list[float]:
        timings = []
        for n in itertools.islice(numbers, count):
            start = time.perf_counter()
            await step(n)
            timings.append(ms_since(start))
        return timings

    return lambda count: runner.run(turn(count))


def taking_turns(
    label: str, contenders: dict[str, tuple[int, Turn]], turns: int
) -> dict[str, dict[str, Any]]:
    """Each contender's rate, latency and client CPU over ``turns`` turns in rotation.

    A contender is ``(count, turn)``: every turn, ``turn(count)`` runs its share.
    """
    sides = {name: Turns() for name in contenders}
    for number in range(1, turns + 1):
        progress(f"{label}: turn {number} of {turns}, {len(contenders)} contenders")
        for name, (count, turn) in contenders.items():
            sides[name].take(count, partial(turn, count))
    figures = {name: side.figures() for name, side in sides.items()}
    return {
        name: {"per_s": f["per_s"], "cpu_us": f["cpu_us"], **f["latency"]}
        for name, f in figures.items()
    }


# -- 1. LangGraph: one superstep, and a whole ainvoke -------------------------------------


class GraphState(TypedDict):
    """The one channel of the one-node graph: the ~2 KB state."""

    state: dict[str, Any]


def node(state: GraphState) -> dict[str, Any]:
    """The node: the next step of the state."""
    return {"state": {**state["state"], "step": state["state"]["step"] + 1}}


def one_node_graph(saver: BaseCheckpointSaver[Any]) -> Any:
    builder = StateGraph(GraphState)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    builder.add_edge("node", END)
    return builder.compile(checkpointer=saver)


@asynccontextmanager
async def langgraph_saver(dsn: str, schema: str) -> AsyncIterator[AsyncPostgresSaver]:
    """LangGraph's saver, its tables in ``schema`` (it takes no schema: ``search_path`` does)."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    params = psycopg.conninfo.conninfo_to_dict(dsn)
    conninfo = psycopg.conninfo.make_conninfo("", **params, options=f"-c search_path={schema}")
    async with AsyncPostgresSaver.from_conn_string(conninfo) as saver:
        await saver.setup()
        yield saver


async def supersteps(saver: BaseCheckpointSaver[Any]) -> Callable[[int], Awaitable[object]]:
    """Supersteps of one node on one thread: the node's writes, then the next checkpoint."""
    config: RunnableConfig = {"configurable": {"thread_id": str(uuid.uuid4()), "checkpoint_ns": ""}}
    config = await saver.aput(config, empty_checkpoint(), {"source": "input", "step": -1}, {})
    version = saver.get_next_version(None, None)

    async def step(n: int) -> object:
        nonlocal config, version
        state = {**STATE, "step": n}
        await saver.aput_writes(config, [("state", state)], str(uuid.uuid4()), TASK_PATH)
        version = saver.get_next_version(version, None)
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"state": state}
        checkpoint["channel_versions"] = {"state": version}
        config = await saver.aput(
            config, checkpoint, {"source": "loop", "step": n}, {"state": version}
        )
        return config

    return step


def invokes(saver: BaseCheckpointSaver[Any]) -> Callable[[int], Awaitable[object]]:
    """Whole ``ainvoke`` calls of the one-node graph, each on a fresh thread."""
    graph = one_node_graph(saver)
    prefix = uuid.uuid4().hex[:8]

    async def invoke(n: int) -> object:
        config: RunnableConfig = {"configurable": {"thread_id": f"{prefix}-{n}"}}
        return await graph.ainvoke({"state": {**STATE, "step": n}}, config)

    return invoke


def langgraph(runner: asyncio.Runner, dsn: str, sizes: Sizes) -> dict[str, Any]:
    """Supersteps and ``ainvoke`` calls through both savers, taking turns."""
    with ExitStack() as schemas:
        lg_schema = schemas.enter_context(scratch_schema(dsn, "bench_conc_lg"))
        actae_schema = schemas.enter_context(scratch_schema(dsn, "bench_conc_lg_actae"))
        url = f"{with_schema(dsn, actae_schema)}&{POOL}"
        savers = AsyncExitStack()
        try:
            theirs = runner.run(savers.enter_async_context(langgraph_saver(dsn, lg_schema)))
            ours = runner.run(savers.enter_async_context(AsyncActaeSaver.from_url(url)))
            contenders = {
                "superstep, AsyncPostgresSaver": (
                    sizes.supersteps,
                    counted(runner.run(supersteps(theirs)), runner),
                ),
                "superstep, AsyncActaeSaver": (
                    sizes.supersteps,
                    counted(runner.run(supersteps(ours)), runner),
                ),
                "ainvoke, AsyncPostgresSaver": (sizes.invokes, counted(invokes(theirs), runner)),
                "ainvoke, AsyncActaeSaver": (sizes.invokes, counted(invokes(ours), runner)),
            }
            for _, turn in contenders.values():
                turn(sizes.warmup)
            return taking_turns("LangGraph", contenders, sizes.turns)
        finally:
            runner.run(savers.aclose())


# -- 2. transitions: 32 coroutines on AsyncStore, 4 threads on Store ----------------------


class Channels:
    """Runs of their own for the coroutines or threads of one contender, with their heads."""

    def __init__(self, runs: list[actae.RunInfo]) -> None:
        self.runs = runs
        self.heads: list[Any] = list(runs)  # a new run's info names its head
        self.next = [0] * len(runs)  # the number of each channel's next transition

    def numbers(self, index: int, count: int) -> range:
        """The numbers of channel ``index``'s next ``count`` transitions (never repeated)."""
        first = self.next[index]
        self.next[index] += count
        return range(first, first + count)


def async_actae(runner: asyncio.Runner, store: actae.AsyncStore) -> Turn:
    """Turns of transitions from ``COROUTINES`` coroutines, each on its own run."""

    async def start() -> list[actae.RunInfo]:
        return [
            await store.start_run(f"conc-{uuid.uuid4()}", agent_id="bench", state=STATE)
            for _ in range(COROUTINES)
        ]

    channels = Channels(runner.run(start()))

    async def one(index: int, count: int, timings: list[float]) -> None:
        run = channels.runs[index]
        for n in channels.numbers(index, count):
            start = time.perf_counter()
            channels.heads[index] = await atransition_step(store, run, channels.heads[index], n)
            timings.append(ms_since(start))

    async def turn(count: int) -> list[float]:
        timings: list[float] = []
        share = count // COROUTINES
        await asyncio.gather(*(one(i, share, timings) for i in range(COROUTINES)))
        return timings

    return lambda count: runner.run(turn(count))


def in_threads(work: Callable[[int, int, list[float]], None], count: int) -> list[float]:
    """``work(index, share, timings)`` in each of ``THREADS`` threads; all their latencies."""
    timings: list[float] = []
    share = count // THREADS
    threads = [threading.Thread(target=work, args=(i, share, timings)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return timings


def threaded_actae(store: actae.Store) -> Turn:
    """Turns of transitions from ``THREADS`` threads, each on its own run."""
    channels = Channels(
        [
            store.start_run(f"conc-{uuid.uuid4()}", agent_id="bench", state=STATE)
            for _ in range(THREADS)
        ]
    )

    def one(index: int, count: int, timings: list[float]) -> None:
        run = channels.runs[index]
        for n in channels.numbers(index, count):
            start = time.perf_counter()
            channels.heads[index] = transition_step(store, run, channels.heads[index], n)
            timings.append(ms_since(start))

    return partial(in_threads, one)


def raw_row(channel: uuid.UUID, cursor: int) -> tuple[Any, ...]:
    """The raw baseline's row for transition ``cursor`` (as ``RawBaseline.transitions``)."""
    return (
        channel,
        cursor,
        cursor,
        cursor,
        "step",
        orjson.dumps({"n": cursor}).decode(),
        orjson.dumps({**STATE, "step": cursor}).decode(),
        f"{channel}:{cursor}",
    )


def async_raw(runner: asyncio.Runner, raw: RawBaseline, pool: AsyncConnectionPool[Any]) -> Turn:
    """The raw baseline from ``COROUTINES`` coroutines on an ``AsyncConnectionPool``."""
    insert = sql.SQL("INSERT INTO {} VALUES (%s, %s, %s, %s, %s, %s, %s, %s)").format(raw.table())

    async def one(count: int, timings: list[float]) -> None:
        channel = uuid.uuid4()  # a fresh channel a turn, as RawBaseline.transitions
        for cursor in range(1, count + 1):
            start = time.perf_counter()
            async with pool.connection() as conn:
                await conn.execute(insert, raw_row(channel, cursor))
            timings.append(ms_since(start))

    async def turn(count: int) -> list[float]:
        timings: list[float] = []
        await asyncio.gather(*(one(count // COROUTINES, timings) for _ in range(COROUTINES)))
        return timings

    return lambda count: runner.run(turn(count))


def threaded_raw(raw: RawBaseline, stack: ExitStack) -> Turn:
    """The raw baseline from ``THREADS`` threads, one connection each (``RawBaseline``)."""
    conns = [stack.enter_context(psycopg.connect(raw.dsn, autocommit=True)) for _ in range(THREADS)]

    def one(index: int, count: int, timings: list[float]) -> None:
        timings.extend(raw.transitions(conns[index], uuid.uuid4(), count))

    return partial(in_threads, one)


def transitions(runner: asyncio.Runner, dsn: str, sizes: Sizes) -> dict[str, Any]:
    """The four contenders of measurement 2, taking turns."""
    with ExitStack() as stack:
        schema = stack.enter_context(scratch_schema(dsn, "bench_conc"))
        raw = RawBaseline(dsn, stack.enter_context(scratch_schema(dsn, "bench_conc_raw")))
        url = f"{with_schema(dsn, schema)}&{POOL}"
        opened = AsyncExitStack()
        try:
            astore = runner.run(opened.enter_async_context(actae.open_async(url)))
            pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
                dsn, min_size=POOL_MIN, max_size=POOL_MAX, kwargs={"autocommit": True}, open=False
            )
            runner.run(opened.enter_async_context(pool))
            store = stack.enter_context(actae.open(url))
            turns: dict[str, Turn] = {
                f"AsyncStore, {COROUTINES} coroutines": async_actae(runner, astore),
                f"Store, {THREADS} threads": threaded_actae(store),
                f"raw async, {COROUTINES} coroutines": async_raw(runner, raw, pool),
                f"raw, {THREADS} threads": threaded_raw(raw, stack),
            }
            for turn in turns.values():
                turn(sizes.warmup * COROUTINES)
            contenders = {name: (sizes.transitions, turn) for name, turn in turns.items()}
            return taking_turns("transitions", contenders, sizes.turns)
        finally:
            runner.run(opened.aclose())


# -- report ---------------------------------------------------------------------------------


def table(results: dict[str, Any]) -> str:
    lines = [
        "| ~2 KB state, PostgreSQL | per s | p50 ms | p99 ms | client CPU µs | ratio |",
        "|---|---|---|---|---|---|",
    ]

    def row(name: str, data: dict[str, Any], ratio: str) -> None:
        lines.append(
            f"| {name} | {data['per_s']:,.0f} | {data['p50_ms']:.2f} | {data['p99_ms']:.2f} | "
            f"{data['cpu_us']:,.0f} | {ratio} |"
        )

    lg = results["langgraph"]
    for what in ("superstep", "ainvoke"):
        theirs, ours = lg[f"{what}, AsyncPostgresSaver"], lg[f"{what}, AsyncActaeSaver"]
        row(f"LangGraph {what}, AsyncPostgresSaver", theirs, "")
        row(
            f"LangGraph {what}, AsyncActaeSaver",
            ours,
            f"{ours['per_s'] / theirs['per_s']:.2f}x AsyncPostgresSaver",
        )
    tr = results["transitions"]
    a, s = tr[f"AsyncStore, {COROUTINES} coroutines"], tr[f"Store, {THREADS} threads"]
    ra, rs = tr[f"raw async, {COROUTINES} coroutines"], tr[f"raw, {THREADS} threads"]
    row(f"transition, Store, {THREADS} threads", s, f"{s['per_s'] / rs['per_s']:.0%} of raw")
    row(
        f"transition, AsyncStore, {COROUTINES} coroutines",
        a,
        f"{a['per_s'] / ra['per_s']:.0%} of raw; {a['per_s'] / s['per_s']:.2f}x Store",
    )
    row(f"raw INSERT, {THREADS} threads", rs, "")
    row(
        f"raw INSERT, {COROUTINES} coroutines on AsyncConnectionPool",
        ra,
        f"{ra['per_s'] / rs['per_s']:.2f}x {THREADS} threads",
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dsn", default=DSN)
    parser.add_argument("--quick", action="store_true", help="fewer, shorter turns")
    args = parser.parse_args()
    sizes = QUICK if args.quick or QUICK_RUN else FULL
    results: dict[str, Any] = {
        **stamp(),
        "quick": args.quick,
        "coroutines": COROUTINES,
        "threads": THREADS,
    }
    with asyncio.Runner() as runner:
        progress("LangGraph: a superstep and an ainvoke through each saver, by turns")
        results["langgraph"] = langgraph(runner, args.dsn, sizes)
        progress(f"transitions: {COROUTINES} coroutines and {THREADS} threads, by turns")
        results["transitions"] = transitions(runner, args.dsn, sizes)
    save("concurrency", results)
    print(f"\nActae concurrency benchmark, {results['date']}, {results['machine']}\n")
    print(table(results))


if __name__ == "__main__":
    main()
