"""What only the asyncio face has: concurrency on one loop, ``async for``, a loop never blocked.

Everything ``Store`` promises is held for ``AsyncStore`` by running the whole contract through
it (``tests/contract/conftest.py``); these cases are about coroutines themselves.
"""

from __future__ import annotations

import asyncio
import inspect
import sqlite3
import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest

import actae
from actae.adapters.runtime.async_store import AsyncStore
from tests.helpers import ticks_while

NOT_COROUTINES = {
    "url": "a property",
    "redactor": "a property",
    "encrypting": "a property",
    "now": "the clock does no IO (the database's is sampled in the background)",
    "clock_skew": "no IO, as now()",
    "on_commit": "registers a listener",
    "projector": "gives the projector, which runs in a thread of its own",
    "subscribe": "an async context manager, entered with `async with`",
    "close": "aclose() is the coroutine; `async with` calls it",
}


def test_every_store_method_is_a_coroutine_of_the_async_store() -> None:
    public = {name for name in dir(actae.Store) if not name.startswith("_")}
    missing = sorted(name for name in public if not hasattr(AsyncStore, name))
    assert missing == ["close"]
    not_awaited = sorted(
        name
        for name in public - {"close"}
        if not inspect.iscoroutinefunction(getattr(AsyncStore, name))
    )
    assert not_awaited == sorted(set(NOT_COROUTINES) - {"close"})


async def test_fifty_coroutines_racing_on_one_cursor_leave_one_winner_each_and_no_gap(
    store_url: str,
) -> None:
    async with actae.open_async(store_url) as store:
        run = await store.start_run("race", agent_id="racer", state={})
        winners: dict[int, list[int]] = {}

        async def racer(number: int) -> None:
            while True:
                head = await store.head(run.channel_id)
                if head.cursor >= 60:
                    return
                try:
                    receipt = await store.record(
                        run.channel_id,
                        kind="lap",
                        payload={"racer": number},
                        expected_cursor=head.cursor,
                    )
                except actae.ConflictError:
                    continue
                winners.setdefault(receipt.cursor, []).append(number)

        await asyncio.gather(*(racer(number) for number in range(50)))
        events = await store.events(run.channel_id)
    assert [event.cursor for event in events] == list(range(1, 61))
    assert sorted(winners) == list(range(2, 61))
    assert all(len(won) == 1 for won in winners.values())
    assert [event.contents()["racer"] for event in events[1:]] == [
        winners[cursor][0] for cursor in range(2, 61)
    ]


async def test_async_for_delivers_history_then_live_events(store_url: str) -> None:
    async with actae.open_async(store_url) as store:
        run = await store.start_run("follow", agent_id="a", state={})
        for lap in range(3):
            await store.record(
                run.channel_id, kind="lap", payload={"lap": lap}, expected_cursor=1 + lap
            )
        seen: list[int] = []
        async with store.subscribe(run.channel_id, after=1, poll_interval=5.0) as events:
            async for event in events:
                seen.append(event.cursor)
                if event.cursor == 4:  # history done: the next one is written now, live
                    await store.record(run.channel_id, kind="lap", payload={}, expected_cursor=4)
                if event.cursor == 5:
                    break
            assert events.position == 5
    assert seen == [2, 3, 4, 5]


async def test_a_global_subscription_stops_when_asked(store_url: str) -> None:
    async with actae.open_async(store_url) as store:
        await store.start_run("follow", agent_id="a", state={})
        async with store.subscribe(None, after=0) as events:
            first = await anext(events)
            events.stop()
            rest = [event async for event in events]
    assert first.cursor == 1
    assert rest == []


async def test_a_bad_subscription_fails_when_entered_with_the_sync_error(store_url: str) -> None:
    async with actae.open_async(store_url) as store:
        run = await store.start_run("follow", agent_id="a", state={})
        with pytest.raises(actae.NotFoundError, match="ends at cursor 1"):
            async with store.subscribe(run.channel_id, after=7):
                pass
        with pytest.raises(actae.ValidationError):
            async with store.subscribe(run.channel_id, after=-1):
                pass


async def test_a_sqlite_write_waiting_for_the_file_lock_does_not_block_the_loop(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.db"
    async with actae.open_async(f"sqlite:///{path}") as store:
        run = await store.start_run("w", agent_id="a", state={})
        holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        holder.execute("BEGIN IMMEDIATE")  # another process's writer holds the lock
        let_go = threading.Timer(0.5, holder.execute, ("ROLLBACK",))  # even if the loop hangs
        let_go.start()
        ticks, written = await ticks_while(
            store.record(run.channel_id, kind="k", payload={}, expected_cursor=1)
        )
        let_go.join()
        holder.close()
        assert written.cursor == 2
    assert ticks >= 20  # 0.5 s of 10 ms ticks, had the write blocked the loop: 0 or 1


@pytest.mark.postgres
async def test_a_postgres_write_waiting_for_a_lock_does_not_block_the_loop(
    pg_url: str, pg_dsn: str
) -> None:
    async with actae.open_async(pg_url) as store:
        run = await store.start_run("w", agent_id="a", state={})
        schema = pg_url.rsplit("schema=", 1)[1]
        with psycopg.connect(pg_dsn) as holder:
            holder.execute(f'LOCK TABLE "{schema}".actae_events IN EXCLUSIVE MODE')
            let_go = threading.Timer(0.5, holder.rollback)  # even if the loop hangs
            let_go.start()
            ticks, written = await ticks_while(
                store.record(run.channel_id, kind="k", payload={}, expected_cursor=1)
            )
            let_go.join()
        assert written.cursor == 2
    assert ticks >= 20


@pytest.mark.postgres
async def test_postgres_coroutines_use_the_async_pool_not_the_sync_one(pg_url: str) -> None:
    async with actae.open_async(pg_url) as store:
        recorder: Any = store.sync._service.recorder
        sync_requests = recorder.datastore.pool.get_stats().get("requests_num", 0)
        run = await store.start_run("w", agent_id="a", state={})
        await store.record(run.channel_id, kind="k", payload={}, expected_cursor=1)
        await store.events(None)
        await store.position()
        assert recorder.async_pool.get_stats().get("requests_num", 0) >= 4
        assert recorder.datastore.pool.get_stats().get("requests_num", 0) == sync_requests
