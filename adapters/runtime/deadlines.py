"""The deadline of the effect attempt running now: ``actae.current_deadline()``.

Nobody takes an effect over before its attempt's deadline (claim time plus ``timeout``, on
the store's clock), so a provider call that honours it can never land after another worker's
retry. It is a context variable: there in plain functions, coroutines and their threads.
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
"""Seconds between looks at the store's clock (it may be virtual, so cannot be slept towards)."""

_DEADLINE: ContextVar[datetime | None] = ContextVar("actae_effect_deadline", default=None)


def current_deadline() -> datetime | None:
    """When the effect attempt running now must be over (store's clock); ``None`` outside one.

    A provider call can use it as its timeout: ``(deadline - store.now()).total_seconds()``.
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
    """``await awaitable`` as a task of its own, cancelled when ``clock()`` reaches ``deadline``."""
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
