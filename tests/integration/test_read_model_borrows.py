"""The read models' pooled connection is lent per unit of work, never shared between two.

An ``AsyncWorker`` serves its runs as coroutines on one thread, each inside a portal: a
connection lent per *thread* would put a second run's transaction on the first one's
connection, so the two would commit (or roll back) together.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time

import psycopg
import pytest

import actae
from actae.adapters.persistence.awaiting import awaiting, run_in_portal
from actae.adapters.readside.analyst_sql import ANALYST_SESSIONS
from actae.adapters.readside.readmodels import PostgresReadModels

pytestmark = pytest.mark.postgres

DEADLINE = 30.0


def test_two_coroutines_on_one_thread_hold_two_transactions(pg_url: str) -> None:
    async def main() -> dict[str, int]:
        async with actae.open_async(pg_url) as store:
            db = store.sync.projector().db
            assert isinstance(db, PostgresReadModels)
            first_in, second_done = asyncio.Event(), asyncio.Event()
            sessions: dict[str, int] = {}

            def first() -> None:
                with db.transaction():
                    sessions["first"] = db.conn.info.backend_pid
                    first_in.set()
                    awaiting(asyncio.wait_for(second_done.wait(), DEADLINE))

            def second() -> None:
                awaiting(asyncio.wait_for(first_in.wait(), DEADLINE))
                try:
                    with db.transaction():
                        sessions["second"] = db.conn.info.backend_pid
                finally:
                    second_done.set()

            await asyncio.gather(run_in_portal(first), run_in_portal(second))
            return sessions

    sessions = asyncio.run(main())
    assert sessions["first"] != sessions["second"], "one connection served both transactions"


def test_an_async_worker_waiting_on_a_lock_leaves_the_loop_free(pg_url: str, pg_dsn: str) -> None:
    """A worker's read-model statement stuck behind a lock holds up a thread, not the loop."""
    registry = actae.Registry()

    @registry.workflow("agent")
    async def workflow(ctx: actae.AsyncRunContext) -> dict[str, int]:
        return await ctx.step("one", lambda: {"n": 1})

    schema = pg_url.rsplit("schema=", 1)[1].split("&", maxsplit=1)[0]
    found: dict[str, object] = {}

    def hold_the_leases(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        with psycopg.connect(pg_dsn, autocommit=False) as side:
            side.execute(f'LOCK TABLE "{schema}".actae_run_leases IN ACCESS EXCLUSIVE MODE')
            ready.set()
            try:
                found["waiter"] = wait_for_lock_waiter(side, schema)
                probe = asyncio.run_coroutine_threadsafe(asyncio.sleep(0), loop)
                probe.result(timeout=5)  # the loop answers while the worker waits
                found["loop"] = "free"
            except Exception as error:
                found["loop"] = repr(error)
            finally:
                side.rollback()

    async def main() -> actae.RunStatus:
        async with actae.open_async(pg_url) as store:
            run = await store.start_run("wf", agent_id="agent", state={})
            store.sync.projector().catch_up()
            worker = actae.AsyncWorker(store, name="w", registry=registry, concurrency=2)
            ready = threading.Event()
            holder = threading.Thread(
                target=hold_the_leases, args=(asyncio.get_running_loop(), ready)
            )
            holder.start()
            await asyncio.to_thread(ready.wait, DEADLINE)
            await asyncio.wait_for(worker.run_until_idle(), DEADLINE)
            await asyncio.to_thread(holder.join, DEADLINE)
            return (await store.run(run.run_id)).status

    status = asyncio.run(main())
    assert found.get("loop") == "free", found
    assert status is actae.RunStatus.COMPLETED


def wait_for_lock_waiter(side: psycopg.Connection[tuple[object, ...]], schema: str) -> str:
    """The application name of a session that waits for ``side``'s lock (deadline: ``DEADLINE``).

    Only ``side``'s: another test's lock waits on the shared server must not count.
    """
    deadline = time.monotonic() + DEADLINE
    with psycopg.connect(side.info.dsn, autocommit=True) as watcher:
        while time.monotonic() < deadline:
            row = watcher.execute(
                "SELECT application_name FROM pg_stat_activity"
                " WHERE %s = ANY(pg_blocking_pids(pid))",  # waits for the side's lock only
                [side.info.backend_pid],
            ).fetchone()
            if row is not None:
                return str(row[0])
            time.sleep(0.01)  # polling the server for the condition, with a deadline
    raise TimeoutError(f"no session waited for the lock on {schema}.actae_run_leases")


def test_analysts_statements_take_at_most_two_sessions_at_once(pg_url: str, pg_dsn: str) -> None:
    """A burst of ``projector.query`` calls waits its turn instead of taking connections."""
    callers = ANALYST_SESSIONS + 2
    with actae.open(pg_url) as store, psycopg.connect(pg_dsn, autocommit=False) as side:
        projector = store.projector()
        side.execute("SELECT pg_advisory_xact_lock(4242)")  # each analyst statement waits
        statement = "SELECT pg_advisory_xact_lock_shared(4242)"
        threads = [
            threading.Thread(target=projector.query, args=(statement,)) for _ in range(callers)
        ]
        for thread in threads:
            thread.start()
        try:
            deadline = time.monotonic() + DEADLINE
            while (
                waiting_on_the_lock(side) + waiting_for_a_turn(threads) < callers
            ):  # every caller is either in the server's lock wait or in the turn's
                assert time.monotonic() < deadline, "the callers never all waited"
                time.sleep(0.01)  # polling for the condition, with a deadline
            assert waiting_on_the_lock(side) == ANALYST_SESSIONS
        finally:
            side.rollback()
            for thread in threads:
                thread.join(DEADLINE)


def waiting_on_the_lock(side: psycopg.Connection[tuple[object, ...]]) -> int:
    """Sessions that wait for an advisory lock (the analysts' statements)."""
    with psycopg.connect(side.info.dsn, autocommit=True) as watcher:
        row = watcher.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        ).fetchone()
    return int(row[0]) if row else 0


def waiting_for_a_turn(threads: list[threading.Thread]) -> int:
    """Of ``threads``, those that wait to acquire a lock inside an analyst's statement call."""
    frames = sys._current_frames()  # where each thread stands, read only
    count = 0
    for thread in threads:
        names = []
        frame = frames.get(thread.ident or -1)
        while frame is not None:
            names.append((frame.f_code.co_name, frame.f_code.co_filename))
            frame = frame.f_back
        acquiring = any(name == "acquire" and "threading" in file for name, file in names)
        in_a_query = any(name == "run" and file.endswith("analyst_sql.py") for name, file in names)
        count += acquiring and in_a_query
    return count
