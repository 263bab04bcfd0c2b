"""Replay-to-live subscriptions for ``async for``: the same pull, an awaited wait.

An :class:`AsyncSubscription` drives a :class:`~actae.adapters.readside.subscription.
Subscription` (the one place that knows positions, batches and outages) and replaces only
its waiting: when there is nothing new, the coroutine awaits a wake-up instead of blocking
its thread. The wake-up is this process's commit signal; commits of other processes are
found by looking again after the subscription's backoff wait (on every backend).
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import Protocol, Self

from actae.adapters.persistence.awaiting import run_in_portal
from actae.adapters.readside.subscription import Subscription
from actae.domain.values import ChannelEvent


class AsyncWaiter(Protocol):
    """Suspends the subscriber until new events may exist, or the timeout passes."""

    async def wait(self, timeout: float) -> None:
        """Return early when woken."""

    def wake(self) -> None:
        """Make a pending ``wait`` return (used by ``stop()``)."""

    async def close(self) -> None:
        """Release resources."""


class CommitSignal:
    """Commits of this process, told to the subscribers on one event loop.

    Writes may run in worker threads; each commit sets every live waiter's event through
    ``call_soon_threadsafe``.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._events: weakref.WeakSet[asyncio.Event] = weakref.WeakSet()

    def committed(self, _events: Sequence[object]) -> None:
        """A commit listener (``Store.on_commit``): wake the subscribers."""
        with contextlib.suppress(RuntimeError):  # the loop has closed: no one is waiting
            self._loop.call_soon_threadsafe(self._wake_all)

    def _wake_all(self) -> None:
        for event in list(self._events):
            event.set()

    def waiter(self) -> SignalWaiter:
        """A waiter woken by this process's commits."""
        event = asyncio.Event()
        self._events.add(event)
        return SignalWaiter(event, self._loop)


class SignalWaiter:
    """Awaits the commit signal, or the poll interval (commits of other processes)."""

    def __init__(self, event: asyncio.Event, loop: asyncio.AbstractEventLoop) -> None:
        self._event = event
        self._loop = loop
        self._woken = False

    async def wait(self, timeout: float) -> None:
        """Await a commit of this process, or ``timeout`` seconds."""
        if not self._woken:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._event.wait(), timeout)
        self._event.clear()

    def wake(self) -> None:
        """Make waits return at once (from any thread, as ``Subscription.stop``)."""
        self._woken = True
        with contextlib.suppress(RuntimeError):  # the loop has closed: no one is waiting
            self._loop.call_soon_threadsafe(self._event.set)

    async def close(self) -> None:
        """Nothing to release."""


class AsyncSubscription:
    """``async with store.subscribe(...) as events: async for event in events: ...``.

    Stored history first, then live, until ``stop()``; ``position`` is the last delivered
    position, from which a new subscription continues exactly.
    """

    def __init__(
        self,
        start: Callable[[], Awaitable[Subscription]],
        waiter: Callable[[], AsyncWaiter],
    ) -> None:
        self._start = start
        self._new_waiter = waiter
        self._pull: Subscription | None = None
        self._waiter: AsyncWaiter | None = None

    @property
    def position(self) -> int:
        """The last delivered position (the ``after`` given, before the first event)."""
        if self._pull is None:
            raise RuntimeError("enter the subscription first: async with store.subscribe(...)")
        return self._pull.position

    async def __aenter__(self) -> Self:
        self._pull = await self._start()
        self._waiter = self._new_waiter()
        return self

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> ChannelEvent:
        pull, waiter = self._pull, self._waiter
        if pull is None or waiter is None:
            raise RuntimeError("enter the subscription first: async with store.subscribe(...)")
        while not pull.stopped:
            event = pull.buffered()
            if event is None:
                event = await run_in_portal(pull.take)
            if event is not None:
                return event
            await waiter.wait(pull.next_wait())
        raise StopAsyncIteration

    def stop(self) -> None:
        """End the iteration; a pending ``__anext__`` returns promptly."""
        if self._pull is not None:
            self._pull.stop()
        if self._waiter is not None:
            self._waiter.wake()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        if self._waiter is not None:
            await self._waiter.close()
