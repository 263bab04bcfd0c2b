"""What one console process holds: the store, its users and sessions, and its live streams.

A session is a random id in an HttpOnly cookie, kept in memory under the id's hash (a
lookup's timing says nothing of other ids). Streams per user are capped, so one user's many
tabs cannot take every connection the database allows.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from starlette.requests import HTTPConnection

from actae.adapters.console.auth import User, Users
from actae.adapters.console.errors import Refused
from actae.adapters.runtime.async_store import AsyncStore
from actae.adapters.runtime.store import Store

COOKIE = "actae_session"
SESSION_HOURS = 12


@dataclass(frozen=True)
class Session:
    """A signed-in browser: who, the token its pages send with every change, and until when."""

    user: User
    csrf: str
    expires: float  # time.monotonic()


def _key(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


class Sessions:
    """The live sessions of this process (thread-safe: handlers run in a thread pool)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: dict[str, Session] = {}

    def start(self, user: User) -> tuple[str, Session]:
        """A new session for ``user``: its id (for the cookie) and the session."""
        session_id = secrets.token_urlsafe(32)
        session = Session(user, secrets.token_urlsafe(32), time.monotonic() + SESSION_HOURS * 3600)
        with self._lock:
            self._forget_expired()
            self._live[_key(session_id)] = session
        return session_id, session

    def find(self, session_id: str) -> Session | None:
        """The live session with id ``session_id``, else ``None``."""
        with self._lock:
            self._forget_expired()
            return self._live.get(_key(session_id))

    def end(self, session_id: str) -> None:
        """Sign the session out (nothing happens for an unknown id)."""
        with self._lock:
            self._live.pop(_key(session_id), None)

    def _forget_expired(self) -> None:
        now = time.monotonic()
        for key in [key for key, session in self._live.items() if session.expires <= now]:
            del self._live[key]


STREAMS_PER_USER = 8  # event streams one user may have open at once; one more is refused (429)


@dataclass
class Console:
    """The console's state, shared by every request; it owns the store, and closes it."""

    store: Store
    users: Users
    sessions: Sessions = field(default_factory=Sessions)
    live: AsyncStore | None = None
    origins: frozenset[str] = frozenset()
    streams_per_user: int = STREAMS_PER_USER
    _streams: Counter[str] = field(default_factory=Counter, init=False, repr=False)
    _streams_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    stopping: asyncio.Event = field(default_factory=asyncio.Event, init=False, repr=False)
    _loop: asyncio.AbstractEventLoop | None = field(default=None, init=False, repr=False)

    async def open(self) -> None:
        """Start the projector and the asyncio face (the app's startup); once only."""
        if self.live is not None:
            return
        self._loop, self.stopping = asyncio.get_running_loop(), asyncio.Event()
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

    def take_stream(self, user: str) -> Callable[[], None]:
        """A slot for one more stream of ``user``'s (429 if all are open): its release (once)."""
        with self._streams_lock:
            if self._streams[user] >= self.streams_per_user:
                raise Refused(
                    429,
                    "too_many_streams",
                    f"{user} has {self._streams[user]} event streams open, the most one user "
                    "may have; close a tab that follows a run, then try again",
                )
            self._streams[user] += 1
        held = [user]

        def release() -> None:
            with self._streams_lock:
                self._streams -= Counter(held)  # drops the user at zero
                held.clear()  # so again gives back nothing

        return release

    def end_streams(self) -> None:
        """End every open event stream; from any thread, or a signal handler."""
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: nothing streams
                self._loop.call_soon_threadsafe(self.stopping.set)


def console_of(connection: HTTPConnection) -> Console:
    """The console serving ``connection``."""
    console: Console = connection.app.state.console
    return console
