"""A run, live, as server-sent events: its channel's events and its status (docs/console.md).

A stream ends when the browser goes or the console stops, so a shutdown never waits for tabs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson
from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from actae.adapters.console.state import Console
from actae.adapters.console.wire import event_document
from actae.adapters.operate.views import caught_up
from actae.adapters.persistence.outages import is_transient, summary
from actae.adapters.readside.async_subscription import AsyncSubscription
from actae.domain.values import ChannelEvent, RunInfo

log = logging.getLogger("actae.console")

KEEPALIVE = 15.0  # seconds of quiet before a comment (and a look at the run's status)
SETTLE = 0.2  # seconds without new events before the run's status follows them
STATUS_AT_LEAST_EVERY = 1.0  # while events keep coming
RECONNECT_MS = 2000
CATCH_UP = 1.0  # seconds a status after events waits, at most, for the read models


class Stream(StreamingResponse):
    """A streaming response that gives its user's stream slot back however it ends.

    Not in the generator: one that never started (the client went first) runs no ``finally``.
    """

    def __init__(self, release: Callable[[], None], *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Stream, then give the slot back."""
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.release()


def message(kind: str, data: Any, *, event_id: int | None = None) -> str:
    """One server-sent event: ``event``, optional ``id`` and one line of JSON ``data``."""
    head = f"event: {kind}\n" + (f"id: {event_id}\n" if event_id is not None else "")
    return f"{head}data: {orjson.dumps(data).decode()}\n\n"


class _Arrivals:
    """The next event or the console stopping; a read pending across timeouts loses no event."""

    def __init__(self, events: AsyncSubscription, stopping: asyncio.Event) -> None:
        self._events = events
        self._stopping: asyncio.Future[Any] = asyncio.ensure_future(stopping.wait())
        self._next: asyncio.Future[ChannelEvent] = asyncio.ensure_future(events.__anext__())

    async def wait(self, timeout: float) -> ChannelEvent | None:
        """The next event, or ``None`` after ``timeout`` seconds (``StopAsyncIteration``: stop)."""
        either: set[asyncio.Future[Any]] = {self._stopping, self._next}
        done, _ = await asyncio.wait(either, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if self._stopping in done:
            raise StopAsyncIteration
        if self._next not in done:
            return None
        event = self._next.result()  # StopAsyncIteration once the subscription stops
        self._next = asyncio.ensure_future(self._events.__anext__())
        return event

    def close(self) -> None:
        """Drop the pending reads (not awaited: the stream may be cancelled itself)."""
        for task in (self._stopping, self._next):
            if not task.done():
                task.cancel()
            elif not task.cancelled():
                task.exception()  # retrieved, so asyncio does not report it


def _patience(unsent_since: float | None) -> float:
    """How long to wait for the next event before sending the status (or a keepalive)."""
    if unsent_since is None:
        return KEEPALIVE
    overdue = unsent_since + STATUS_AT_LEAST_EVERY - time.monotonic()
    return max(0.0, min(SETTLE, overdue))


async def _status(read: Callable[[], dict[str, Any]]) -> dict[str, Any] | None:
    """``read()`` in a thread; ``None`` while the database is out of reach (the events go on)."""
    try:
        return await asyncio.to_thread(read)
    except Exception as error:
        if not is_transient(error):
            raise
        log.warning("a run's status could not be read (%s); its stream goes on", summary(error))
        return None


async def follow(
    console: Console, info: RunInfo, after: int, snapshot: Callable[[], dict[str, Any]]
) -> AsyncIterator[str]:
    """The stream of ``info``'s run after cursor ``after``; ``snapshot()`` is its status."""
    live = console.live
    if live is None:  # the console is stopping
        return

    def settled() -> dict[str, Any]:
        caught_up(console.store, CATCH_UP)  # late or not, the status goes out
        return snapshot()

    try:
        async with live.subscribe(info.channel_id, after=after) as events:
            yield f"retry: {RECONNECT_MS}\n\n"
            sent = await _status(snapshot)
            if sent is not None:
                yield message("status", sent)
            arrivals = _Arrivals(events, console.stopping)
            unsent_since: float | None = None  # the first event not yet followed by a status
            try:
                while True:
                    try:
                        event = await arrivals.wait(_patience(unsent_since))
                    except StopAsyncIteration:
                        return
                    if event is not None:
                        yield message("event", event_document(event), event_id=event.cursor)
                        unsent_since = unsent_since or time.monotonic()
                        if time.monotonic() - unsent_since < STATUS_AT_LEAST_EVERY:
                            continue
                    now = await _status(settled)
                    if now is not None and now != sent:
                        sent = now
                        yield message("status", now)
                    elif unsent_since is None:
                        yield ": keepalive\n\n"
                    unsent_since = None
            finally:
                arrivals.close()
    finally:
        log.debug("stream of run %s ended", info.run_id)
