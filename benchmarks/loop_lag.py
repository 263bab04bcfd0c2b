"""Loop lag: how responsive an event loop stays while 32 coroutines write transitions.

An ``AsyncStore`` call runs ``Store``'s own code on the loop's thread and waits, by backend,
only where that code would block (docs/async.md): on PostgreSQL each statement is awaited
on psycopg's ``AsyncConnectionPool``; on SQLite each recorder call runs in a worker thread;
on SQLite and ``memory://`` each recorder call runs in a worker thread. This measures what
those choices cost and spare the loop's other work; on ``memory://``, where nothing waits
on IO, it is the reason calls leave the loop too (a caller that awaited only the store
would never let the loop serve anyone else).

While 32 coroutines write transitions (the ~2 KB state and step of ``benchmarks.core``, each
on its own run), a ticker coroutine sleeps 1 ms in a loop and records how late each wake-up
is: the time any other coroutine of the program (a heartbeat, an HTTP handler, a model
call's stream) would wait for the loop. Each writer awaits ``asyncio.sleep(0)`` between its
transitions, as agent code awaits something (a model call) between steps. The variants:

* ``AsyncStore``, on ``memory://``, SQLite (a file in a temporary folder) and PostgreSQL;
* the same call made directly on the loop, without offloading:
  ``store.sync.transition(...)`` inside the coroutine (it blocks the loop for the call);
* on ``memory://``, each call through ``asyncio.to_thread(store.sync.transition, ...)``;
* on ``memory://``, ``AsyncStore`` without the ``asyncio.sleep(0)``: a coroutine that
  awaits nothing else between transitions, for which no call ever yields;
* idle: the ticker alone, the floor of a 1 ms sleep on this machine.

Each variant writes for a window of ``WINDOW`` seconds per round, in rotation with the
others over ``ROUNDS`` rounds (so that all meet the same moments of a drifting machine);
the lag percentiles are over all wake-ups of all rounds. A fresh ``memory://`` store is
opened for each window (its history lives in the process); each window starts new runs.

Run with ``python -m benchmarks.loop_lag [--dsn DSN] [--quick]``; results go to
``benchmarks/results/loop_lag.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import actae
from benchmarks.common import (
    DSN,
    STATE,
    percentile,
    progress,
    save,
    scratch_schema,
    stamp,
    with_schema,
)
from benchmarks.core import transition_step

WRITERS = 32
TICK = 0.001  # the ticker's sleep, seconds
WINDOW, ROUNDS = 1.0, 3
QUICK_WINDOW, QUICK_ROUNDS = 0.5, 1

Step = Callable[[actae.AsyncStore, actae.RunInfo, Any, int], Awaitable[actae.Receipt]]
"""One transition ``n`` on ``run`` after ``head``, made one of the ways compared."""


async def atransition_step(
    store: actae.AsyncStore, run: actae.RunInfo, head: Any, n: int
) -> actae.Receipt:
    """``benchmarks.core.transition_step``, awaited on an ``AsyncStore``."""
    return await store.transition(
        run.channel_id,
        kind="step",
        payload={"n": n},
        state={**STATE, "step": n},
        expected_version=head.state_version,
        expected_cursor=head.cursor,
        operation_id=f"{run.run_id}:{n}",
    )


async def on_the_loop(
    store: actae.AsyncStore, run: actae.RunInfo, head: Any, n: int
) -> actae.Receipt:
    """The blocking ``Store.transition``, called on the loop's thread: the loop waits."""
    return transition_step(store.sync, run, head, n)


async def in_a_thread(
    store: actae.AsyncStore, run: actae.RunInfo, head: Any, n: int
) -> actae.Receipt:
    """The blocking ``Store.transition`` in a worker thread (``asyncio.to_thread``)."""
    return await asyncio.to_thread(transition_step, store.sync, run, head, n)


@dataclass(frozen=True)
class Variant:
    """One way of writing, on one backend; ``step`` None: the ticker alone."""

    backend: str
    step: Step | None
    yields: bool = True  # each writer awaits asyncio.sleep(0) between transitions


VARIANTS = {
    "idle: the ticker alone": Variant("memory", None),
    "memory://, AsyncStore (calls in a worker thread)": Variant("memory", atransition_step),
    "memory://, store.sync on the loop": Variant("memory", on_the_loop),
    "memory://, asyncio.to_thread(store.sync...)": Variant("memory", in_a_thread),
    "memory://, AsyncStore, no other await": Variant("memory", atransition_step, yields=False),
    "SQLite, AsyncStore (calls in a worker thread)": Variant("sqlite", atransition_step),
    "SQLite, store.sync on the loop": Variant("sqlite", on_the_loop),
    "PostgreSQL, AsyncStore (awaited on the pool)": Variant("postgresql", atransition_step),
    "PostgreSQL, store.sync on the loop": Variant("postgresql", on_the_loop),
}


@dataclass
class Tally:
    """What one variant saw over all its windows."""

    lags: list[float] = field(default_factory=list)  # seconds late, every wake-up
    transitions: int = 0
    seconds: float = 0.0

    def figures(self) -> dict[str, float]:
        """Lag percentiles and maximum in ms, wake-ups, and the write rate."""
        ms = [lag * 1000 for lag in self.lags]
        return {
            "p50_ms": percentile(ms, 0.5),
            "p99_ms": percentile(ms, 0.99),
            "max_ms": max(ms),
            "wakeups": len(ms),
            "transitions_per_s": self.transitions / self.seconds,
        }


async def ticker(deadline: float, lags: list[float]) -> None:
    """Sleep ``TICK`` until ``deadline``; note how late each wake-up is."""
    while (asleep := time.perf_counter()) < deadline:
        await asyncio.sleep(TICK)
        lags.append(time.perf_counter() - asleep - TICK)


async def writer(
    variant: Variant, store: actae.AsyncStore, run: actae.RunInfo, deadline: float
) -> int:
    """Transitions on ``run`` until ``deadline``; how many."""
    assert variant.step is not None
    head: Any = run  # a new run's info names its head
    n = 0
    while time.perf_counter() < deadline:
        head = await variant.step(store, run, head, n)
        n += 1
        if variant.yields:
            await asyncio.sleep(0)
    return n


async def window(variant: Variant, store: actae.AsyncStore, seconds: float, tally: Tally) -> None:
    """One window of ``variant``: the ticker and, unless idle, the writers, on fresh runs."""
    runs = []
    if variant.step is not None:
        runs = [
            await store.start_run(f"lag-{uuid.uuid4()}", agent_id="bench", state=STATE)
            for _ in range(WRITERS)
        ]
    start = time.perf_counter()
    deadline = start + seconds
    tick = asyncio.create_task(ticker(deadline, tally.lags))
    counts = await asyncio.gather(*(writer(variant, store, run, deadline) for run in runs))
    await tick
    tally.seconds += time.perf_counter() - start
    tally.transitions += sum(counts)


@asynccontextmanager
async def stores(dsn: str, folder: str) -> AsyncIterator[dict[str, Callable[[], Any]]]:
    """Each backend's store for a window: SQLite's and PostgreSQL's kept, memory's fresh."""
    async with AsyncExitStack() as stack:
        sqlite = await stack.enter_async_context(actae.open_async(f"sqlite:///{folder}/lag.db"))
        schema = stack.enter_context(scratch_schema(dsn, "bench_lag"))
        postgres = await stack.enter_async_context(actae.open_async(with_schema(dsn, schema)))

        @asynccontextmanager
        async def kept(store: actae.AsyncStore) -> AsyncIterator[actae.AsyncStore]:
            yield store

        yield {
            "memory": lambda: actae.open_async("memory://"),
            "sqlite": lambda: kept(sqlite),
            "postgresql": lambda: kept(postgres),
        }


async def measure(dsn: str, seconds: float, rounds: int) -> dict[str, Any]:
    tallies = {name: Tally() for name in VARIANTS}
    with tempfile.TemporaryDirectory() as folder:
        async with stores(dsn, folder) as opening:
            for number in range(1, rounds + 1):
                progress(f"round {number} of {rounds}: {len(VARIANTS)} variants, {seconds} s each")
                for name, variant in VARIANTS.items():
                    async with opening[variant.backend]() as store:
                        await window(variant, store, seconds, tallies[name])
    return {name: tally.figures() for name, tally in tallies.items()}


def table(results: dict[str, Any]) -> str:
    lines = [
        f"| {WRITERS} coroutines writing transitions | loop lag p50 ms | p99 ms | max ms "
        "| wake-ups | transitions/s |",
        "|---|---|---|---|---|---|",
    ]
    for name, data in results["variants"].items():
        rate = "" if name.startswith("idle") else f"{data['transitions_per_s']:,.0f}"
        lines.append(
            f"| {name} | {data['p50_ms']:.2f} | {data['p99_ms']:.2f} | {data['max_ms']:.1f} "
            f"| {data['wakeups']:,} | {rate} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dsn", default=DSN)
    parser.add_argument("--quick", action="store_true", help="one round of shorter windows")
    args = parser.parse_args()
    seconds, rounds = (QUICK_WINDOW, QUICK_ROUNDS) if args.quick else (WINDOW, ROUNDS)
    results: dict[str, Any] = {
        **stamp(),
        "writers": WRITERS,
        "tick_ms": TICK * 1000,
        "window_s": seconds,
        "rounds": rounds,
    }
    results["variants"] = asyncio.run(measure(args.dsn, seconds, rounds))
    save("loop_lag", results)
    print(f"\nActae loop lag, {results['date']}, {results['machine']}\n")
    print(table(results))


if __name__ == "__main__":
    main()
