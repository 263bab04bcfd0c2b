"""Up to ``concurrency`` runs at once, each a task running the ``Worker``'s code in a portal.

See docs/async.md, "Workers".
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import functools
import logging
from collections.abc import Callable, Coroutine, Mapping
from datetime import datetime
from typing import Any, TextIO, TypeVar

from actae.adapters.persistence.awaiting import awaiting, off_the_loop, run_in_portal
from actae.adapters.persistence.outages import ride_out
from actae.adapters.runtime.async_store import AsyncStore
from actae.adapters.runtime.worker import REGISTRY, RETENTION_EVERY, Registry, Worker
from actae.domain.errors import HistoryRegressedError
from actae.domain.validation import require_int

log = logging.getLogger("actae.worker")
T = TypeVar("T")


class AsyncWorker:
    """Runs registered workflows, up to ``concurrency`` runs at once, until ``request_stop()``."""

    def __init__(
        self,
        store: AsyncStore,
        *,
        name: str,
        registry: Registry = REGISTRY,
        concurrency: int = 8,
        lease: float = 30.0,
        poll_interval: float = 0.2,
        out: TextIO | None = None,
        retention_every: float | None = RETENTION_EVERY,
    ) -> None:
        self.concurrency = require_int("concurrency", concurrency, minimum=1)
        self.store = store
        self._worker = Worker(
            store.sync,
            name=name,
            registry=registry,
            lease=lease,
            poll_interval=poll_interval,
            out=out,
            run_coroutine=self._awaited,
            run_blocking=self._in_thread,
            retention_every=retention_every,
        )
        self.name = self._worker.name
        """The worker's name, as the read models show it."""
        self.outcomes = self._worker.outcomes
        """``(run_id, outcome)`` of every run served so far (the ``Worker``'s own list)."""
        self._threads: concurrent.futures.ThreadPoolExecutor | None = None  # plain workflows'
        self._in_flight: dict[str, asyncio.Task[int]] = {}
        self._fruitless: set[str] = set()  # runs whose last turn could not move them
        self._workflows: set[asyncio.Task[Any]] = set()  # async workflows' coroutines
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = False
        self._changed: asyncio.Event | None = None
        self._regressed: HistoryRegressedError | None = None

    def request_stop(self) -> None:
        """Take no new run; ``run()`` returns once the runs in flight have ended."""
        self._stopping = True
        self._worker.request_stop()
        if self._loop is not None and self._changed is not None:
            self._loop.call_soon_threadsafe(self._changed.set)

    async def run(self) -> None:
        """Work until ``request_stop()``; a pass when a run that moved ends, or each poll."""
        try:
            while not self._stopping:
                await self._start_pass()
                await self._wait_for_change(self._worker.poll_interval)
        except asyncio.CancelledError:  # a shutdown: each workflow ends as if its worker died
            for workflow in list(self._workflows):
                workflow.cancel()
            raise
        finally:
            self._stopping = True
            if self._in_flight:  # shielded: the runs end even if run() itself is cancelled
                served = asyncio.gather(*self._in_flight.values(), return_exceptions=True)
                await asyncio.shield(served)
            await self.withdraw()
            if self._threads is not None:
                self._threads.shutdown(wait=False)
        if self._regressed is not None:  # as Worker.run: the error ends the loop
            raise self._regressed

    async def run_until_idle(self, *, timeout: float = 60.0) -> None:
        """Run passes until one advances nothing (scripts and tests); ``timeout`` seconds."""
        async with asyncio.timeout(timeout):
            while await self.run_once():
                pass

    async def run_once(self) -> int:
        """One pass, as ``Worker.run_once``, ``concurrency`` runs at once; how many advanced."""
        served = await self._start_pass()
        advanced = await asyncio.gather(*served, return_exceptions=True)
        await run_in_portal(off_the_loop, self._worker.end_pass)
        return sum(moves for moves in advanced if isinstance(moves, int))

    async def withdraw(self) -> None:
        """Stop advertising this worker's agents (``run()`` does it when it stops)."""
        await run_in_portal(off_the_loop, self._worker.withdraw)

    async def _start_pass(self) -> list[asyncio.Task[int]]:
        """Start a run for each free slot; the runs started (each ends with its moves)."""
        self._bind()
        worker = self._worker
        begin = functools.partial(
            ride_out, worker.begin_pass, worker.outage, give_up=lambda: self._stopping
        )
        rows, now = await run_in_portal(off_the_loop, begin)  # read models: a thread waits
        started = []
        for row in sorted(rows, key=lambda row: str(row["run_id"]) in self._fruitless):
            run_id = str(row["run_id"])
            if run_id in self._in_flight:
                continue
            if not worker.worth_serving(row, now):
                worker._isolated(row, now)  # no IO: it says why, once (an unserved agent)
                continue
            if self._stopping or len(self._in_flight) >= self.concurrency:
                break
            started.append(self._start(run_id, row, now))
        return started

    def _start(self, run_id: str, row: Mapping[str, Any], now: datetime) -> asyncio.Task[int]:
        """Serve one run in a task of its own; the slot frees itself when it ends."""
        served = asyncio.create_task(run_in_portal(self._worker._isolated, row, now))
        self._in_flight[run_id] = served

        def ended(done: asyncio.Task[int]) -> None:
            del self._in_flight[run_id]
            if done.cancelled():
                return
            error = done.exception()
            if isinstance(error, HistoryRegressedError):  # the store lost history: stop
                self._regressed = error
                self.request_stop()
            elif error is not None:  # the database, not the run: a later pass serves it again
                self._worker.outage.began(error)
            elif not done.result():  # could not move (another's lease): others go first
                self._fruitless.add(run_id)
            else:
                self._fruitless.discard(run_id)
                if self._changed is not None:
                    self._changed.set()  # progress, and a free slot: the next pass may start

        served.add_done_callback(ended)
        return served

    async def _wait_for_change(self, timeout: float) -> None:
        """Until a run ends, a stop is asked for, or ``timeout`` seconds (new runs) pass."""
        assert self._changed is not None  # noqa: S101 - bound by _start_pass
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout)
        self._changed.clear()

    def _bind(self) -> None:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
            self._changed = asyncio.Event()

    def _awaited(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """An async workflow's result, as a task of its own (a shutdown cancels it alone)."""
        workflow = asyncio.get_running_loop().create_task(coroutine)
        self._workflows.add(workflow)
        try:
            return awaiting(workflow)
        except asyncio.CancelledError:
            if workflow.cancelled():  # the workflow, not its run's task
                raise concurrent.futures.CancelledError from None
            raise
        finally:
            self._workflows.discard(workflow)

    def _in_thread(self, function: Callable[[], T]) -> T:
        """A plain workflow's result: it runs in a thread while its run's task awaits it."""
        if self._threads is None:
            self._threads = concurrent.futures.ThreadPoolExecutor(
                self.concurrency, thread_name_prefix=f"actae {self.name}"
            )
        call = contextvars.copy_context().run  # the run's span and logging context go along
        return awaiting(asyncio.get_running_loop().run_in_executor(self._threads, call, function))
