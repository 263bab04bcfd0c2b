"""Where the one command path blocks, an async caller's event loop runs other coroutines instead.

``actae.open_async`` does not have a second implementation of the commands: an
``AsyncStore`` method runs the very ``Store`` method inside a greenback portal
(:func:`run_in_portal`), on the event loop's thread. The PostgreSQL recorder sends each
statement through :func:`awaiting`, the SQLite and in-memory recorders each call through
:func:`off_the_loop`, and both sleep between retries through :func:`pause`: inside a portal
they suspend the calling coroutine (on psycopg's ``AsyncConnectionPool``, on a worker thread,
on ``asyncio.sleep``), so the loop serves other coroutines while the statement is in
flight; outside one (every synchronous caller) they block as before. Everything between two
statements (deciding, validating, encoding) is plain, fast, CPU work.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
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


def off_the_loop(function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``function(*args, **kwargs)``; inside a portal, in a worker thread while the coroutine waits.

    For recorders with no asyncio interface (sqlite3, memory): a thread waits, not the loop.
    """
    if greenback.has_portal():
        return greenback.await_(asyncio.to_thread(function, *args, **kwargs))
    return function(*args, **kwargs)


async def run_in_portal(function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``function(*args, **kwargs)`` on this thread, able to await where it would block."""
    return await greenback.with_portal_run_sync(function, *args, **kwargs)
