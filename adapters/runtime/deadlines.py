"""The deadline of the effect attempt running now: ``actae.current_deadline()``.

Every effect attempt must be over by its deadline (its claim time plus ``timeout``, on the
store's clock): nobody takes the effect over before then, so a provider call that honours
it (an HTTP client's timeout, a deadline passed to the provider) can never land after
another worker's retry. ``fn`` reads the deadline from a context variable, so it is there
in a plain function, in a coroutine and in the thread an async workflow runs a plain
function in. An async ``fn`` is cancelled when the store's clock reaches the deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from datetime import datetime
from typing import TypeVar

T = TypeVar("T")

WATCH_EVERY = 0.05
"""Seconds at most between two looks at the store's clock while an async ``fn`` runs (the
store's clock may be virtual and move in jumps, so its deadline cannot be slept towards)."""

_DEADLINE: ContextVar[datetime | None] = ContextVar("actae_effect_deadline", default=None)


def current_deadline() -> datetime | None:
    """When the effect attempt running now must be over: an aware datetime (store's clock).

    Inside ``ctx.effect``'s ``fn`` it is the attempt's deadline, so a provider call can use
    it as its timeout (``(deadline - store.now()).total_seconds()``). Outside an effect
    attempt it is ``None``.
    """
    return _DEADLINE.get()


@contextlib.contextmanager
def attempt_deadline(deadline: datetime | None) -> Iterator[None]:
    """``current_deadline()`` is ``deadline`` inside the block (an effect attempt's call)."""
    token = _DEADLINE.set(deadline)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


class DeadlineReachedError(Exception):
    """An async ``fn`` was cancelled because its attempt's deadline came (internal signal)."""


async def by_deadline(
    awaitable: Awaitable[T], deadline: datetime, clock: Callable[[], datetime]
) -> T:
    """``await awaitable``, cancelled when ``clock()`` reaches ``deadline``.

    The call runs as a task of its own, so cancelling it leaves the caller's task alone;
    a cancelled caller cancels it too.
    """
    task = asyncio.ensure_future(awaitable)
    try:
        while not task.done():
            left = (deadline - clock()).total_seconds()
            if left <= 0:
                task.cancel()
                await asyncio.wait({task})
                if task.cancelled():
                    raise DeadlineReachedError(deadline.isoformat())
                break  # it finished as it was being cancelled: its answer is late anyway
            await asyncio.wait({task}, timeout=min(left, WATCH_EVERY))
        return task.result()
    finally:
        if not task.done():
            task.cancel()
