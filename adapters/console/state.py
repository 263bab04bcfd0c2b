"""What one console process holds: the store, its users and sessions, and its live streams.

The console owns the store it is given: it starts the projector that keeps the read models
live and an asyncio face for the event streams when the app starts, and closes them (and
the store) when it stops. Stopping first ends every open event stream, so a shutdown never
waits on a browser tab that is still following a run.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

from starlette.requests import HTTPConnection

from actae.adapters.console.auth import Users
from actae.adapters.console.sessions import Sessions
from actae.adapters.runtime.async_store import AsyncStore
from actae.adapters.runtime.store import Store


@dataclass
class Console:
    """The console's state, shared by every request (``request.app.state.console``)."""

    store: Store
    users: Users
    sessions: Sessions = field(default_factory=Sessions)
    live: AsyncStore | None = None
    """The store's asyncio face, for event streams (while the app runs)."""
    streams: int = 0
    """Event streams open now."""
    _stopping: asyncio.Event | None = field(default=None, init=False, repr=False)
    _loop: asyncio.AbstractEventLoop | None = field(default=None, init=False, repr=False)

    async def open(self) -> None:
        """Start the projector and the asyncio face (the app's startup)."""
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        projector = await asyncio.to_thread(self.store.projector)
        projector.start()
        live = AsyncStore(self.store)
        await live.connect()
        self.live = live

    async def close(self) -> None:
        """End the streams, stop the projector and close the store (the app's shutdown)."""
        self.end_streams()
        live, self.live = self.live, None
        if live is not None:
            await live.aclose()  # closes the store, and with it the projector
        else:
            await asyncio.to_thread(self.store.close)

    @property
    def stopping(self) -> asyncio.Event:
        """Set when the console stops: every event stream ends."""
        if self._stopping is None:
            raise RuntimeError("the console has not started: serve its app (or enter TestClient)")
        return self._stopping

    def end_streams(self) -> None:
        """End every open event stream; from any thread, or a signal handler."""
        loop, stopping = self._loop, self._stopping
        if loop is not None and stopping is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: nothing streams
                loop.call_soon_threadsafe(stopping.set)


def console_of(connection: HTTPConnection) -> Console:
    """The console serving ``connection``."""
    console: Console = connection.app.state.console
    return console
