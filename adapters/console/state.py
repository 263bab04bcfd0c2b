"""What one console process holds: the store, its users and sessions, and its live streams.

The console owns the store it is given: it starts the projector that keeps the read models
live and an asyncio face for the event streams when the app starts, and closes them (and
the store) when it stops. Stopping first ends every open event stream, so a shutdown never
waits on a browser tab that is still following a run.

Each open event stream holds a slot of its user's: at most :data:`STREAMS_PER_USER` at
once (each stream reads the store again and again while it follows a run), so one script or
one user's many tabs cannot take every connection the database allows.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from starlette.requests import HTTPConnection

from actae.adapters.console.auth import Users
from actae.adapters.console.errors import Refused
from actae.adapters.console.sessions import Sessions
from actae.adapters.runtime.async_store import AsyncStore
from actae.adapters.runtime.store import Store

STREAMS_PER_USER = 8
"""Event streams one user may have open at once; one more is refused with 429."""


class StreamSlot:
    """One open stream's place in its user's count; :meth:`release` gives it back (once)."""

    def __init__(self, user: str, give_back: Callable[[str], None]) -> None:
        self.user = user
        self._give_back = give_back
        self._lock = threading.Lock()
        self.held = True

    def release(self) -> None:
        """Give the slot back; calling it again does nothing."""
        with self._lock:
            held, self.held = self.held, False
        if held:
            self._give_back(self.user)


@dataclass
class Console:
    """The console's state, shared by every request (``request.app.state.console``)."""

    store: Store
    users: Users
    sessions: Sessions = field(default_factory=Sessions)
    live: AsyncStore | None = None
    """The store's asyncio face, for event streams (while the app runs)."""
    origins: frozenset[str] = frozenset()
    """The origins browsers may change things from (``guards.own_origins``), normalised."""
    streams_per_user: int = STREAMS_PER_USER
    """How many event streams one user may have open at once."""
    _streams: Counter[str] = field(default_factory=Counter, init=False, repr=False)
    _streams_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _stopping: asyncio.Event | None = field(default=None, init=False, repr=False)
    _loop: asyncio.AbstractEventLoop | None = field(default=None, init=False, repr=False)

    async def open(self) -> None:
        """Start the projector and the asyncio face (the app's startup); once only."""
        if self.live is not None:
            return
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
    def streams(self) -> int:
        """Event streams open now, all users together."""
        with self._streams_lock:
            return sum(self._streams.values())

    def take_stream(self, user: str) -> StreamSlot:
        """A slot for one more stream of ``user``'s; 429 if they have all theirs open."""
        with self._streams_lock:
            if self._streams[user] >= self.streams_per_user:
                raise Refused(
                    429,
                    "too_many_streams",
                    f"{user} has {self._streams[user]} event streams open, the most one user "
                    "may have; close a tab that follows a run, then try again",
                )
            self._streams[user] += 1
        return StreamSlot(user, self._give_back)

    def _give_back(self, user: str) -> None:
        with self._streams_lock:
            self._streams[user] -= 1
            if self._streams[user] <= 0:
                del self._streams[user]

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
