"""Replay-to-live subscriptions for ``async for``: the sync ``Subscription``'s pull, awaited.

Only the waiting is its own: this process's commit signal, or the backoff (other processes).
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import Awaitable, Callable, Sequence
from typing import Self

from actae.adapters.persistence.awaiting import run_in_portal
from actae.adapters.readside.subscription import Subscription
from actae.domain.values import ChannelEvent


class CommitSignal:
    """Commits of this process, told to the waiters on each loop (writes may run in threads)."""

    def __init__(self) -> None:
        self._waiting: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, weakref.WeakSet[asyncio.Event]
        ] = weakref.WeakKeyDictionary()

    def committed(self, _events: Sequence[object]) -> None:
        """A commit listener (``Store.on_commit``): wake the subscribers."""
        for loop, events in list(self._waiting.items()):
            with contextlib.suppress(RuntimeError):  # the loop has closed: no one is waiting
                loop.call_soon_threadsafe(_wake_all, list(events))

    def waiter(self) -> SignalWaiter:
        """A waiter on the running loop, woken by this process's commits."""
        loop = asyncio.get_running_loop()
        event = asyncio.Event()
        self._waiting.setdefault(loop, weakref.WeakSet()).add(event)
        return SignalWaiter(event, loop)


def _wake_all(events: list[asyncio.Event]) -> None:
    for event in events:
        event.set()


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


class AsyncSubscription:
    """``async with store.subscribe(...) as events: async for event in events``: replay, live."""

    def __init__(
        self,
        start: Callable[[], Awaitable[Subscription]],
        waiter: Callable[[], SignalWaiter],
    ) -> None:
        self._start = start
        self._new_waiter = waiter
        self._pull: Subscription | None = None
        self._waiter: SignalWaiter | None = None

    @property
    def position(self) -> int:
        """The last delivered position (the ``after`` given, before the first event)."""
        return self._entered()[0].position

    def _entered(self) -> tuple[Subscription, SignalWaiter]:
        if self._pull is None or self._waiter is None:
            raise RuntimeError("enter the subscription first: async with store.subscribe(...)")
        return self._pull, self._waiter

    async def __aenter__(self) -> Self:
        self._pull = await self._start()
        self._waiter = self._new_waiter()
        return self

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> ChannelEvent:
        pull, waiter = self._entered()
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

    async def __aexit__(self, *_: object) -> None:
        self.stop()
