"""Where the one command path blocks, an async caller's event loop runs other coroutines instead.

An ``AsyncStore`` method runs the ``Store`` method in a greenback portal on the loop's thread
(:func:`run_in_portal`); where it would block (:func:`awaiting`, :func:`off_the_loop`,
:func:`pause`) the coroutine suspends instead. Outside a portal these just block.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

import greenback

P = ParamSpec("P")
T = TypeVar("T")


def in_portal() -> bool:
    """Whether the caller is synchronous code that an ``AsyncStore`` method runs in a portal."""
    return greenback.has_portal()


def awaiting(awaitable: Awaitable[T]) -> T:
    """The result of ``awaitable``, awaited by the portal's task (only call inside a portal)."""
    return greenback.await_(awaitable)


def pause(seconds: float) -> None:
    """Wait ``seconds``: the coroutine sleeps inside a portal, the thread sleeps otherwise."""
    if greenback.has_portal():
        greenback.await_(asyncio.sleep(seconds))
    else:
        time.sleep(seconds)


STORE_THREADS = 32
"""Threads that run recorder calls for coroutines (SQLite), apart from user code."""


@functools.cache
def thread_pool(prefix: str, size: int) -> ThreadPoolExecutor:
    """The process's pool of ``size`` threads named ``prefix``, made on first use."""
    return ThreadPoolExecutor(size, thread_name_prefix=prefix)


def off_the_loop(function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``function(*args, **kwargs)``; inside a portal, in a worker thread while the coroutine waits.

    The store's own threads, not the loop's default executor, which workflow code shares: an
    effect's heartbeat must never queue behind the slow functions it guards.
    """
    if greenback.has_portal():
        call = functools.partial(function, *args, **kwargs)
        pool = thread_pool("actae-store", STORE_THREADS)
        return greenback.await_(asyncio.get_running_loop().run_in_executor(pool, call))
    return function(*args, **kwargs)


def blocking(function: Callable[P, T]) -> Callable[P, T]:
    """``function`` (work on a blocking connection), always called through :func:`off_the_loop`."""

    @functools.wraps(function)
    def called(*args: P.args, **kwargs: P.kwargs) -> T:
        return off_the_loop(function, *args, **kwargs)

    return called


async def run_in_portal(function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``function(*args, **kwargs)`` on this thread, able to await where it would block."""
    return await greenback.with_portal_run_sync(function, *args, **kwargs)
