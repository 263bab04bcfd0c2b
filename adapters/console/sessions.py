"""Browser sessions: a random id in an HttpOnly cookie, everything else on the server.

Signing in at ``/login`` with a token starts a session; its id (256 random bits) is the
cookie, and the server keeps the user and the session's CSRF token under the id's hash, so a
lookup's timing says nothing about other ids. Sessions live in this process's memory: a
restart, or ``SESSION_HOURS`` after signing in, means signing in again.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from dataclasses import dataclass

from actae.adapters.console.auth import User

COOKIE = "actae_session"
SESSION_HOURS = 12
"""How long a session lasts after signing in."""


@dataclass(frozen=True)
class Session:
    """A signed-in browser: who, the token its pages send with every change, and until when."""

    user: User
    csrf: str
    expires: float
    """``time.monotonic()`` moment it ends."""


def _key(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


class Sessions:
    """The live sessions of this process (thread-safe: handlers run in a thread pool)."""

    def __init__(self, hours: float = SESSION_HOURS) -> None:
        self._seconds = hours * 3600
        self._lock = threading.Lock()
        self._live: dict[str, Session] = {}

    def start(self, user: User) -> tuple[str, Session]:
        """A new session for ``user``: its id (for the cookie) and the session."""
        session_id = secrets.token_urlsafe(32)
        session = Session(user, secrets.token_urlsafe(32), time.monotonic() + self._seconds)
        with self._lock:
            self._forget_expired()
            self._live[_key(session_id)] = session
        return session_id, session

    def find(self, session_id: str) -> Session | None:
        """The live session with id ``session_id``, else ``None``."""
        with self._lock:
            session = self._live.get(_key(session_id))
            if session is not None and session.expires <= time.monotonic():
                del self._live[_key(session_id)]
                return None
            return session

    def end(self, session_id: str) -> None:
        """Sign the session out (nothing happens for an unknown id)."""
        with self._lock:
            self._live.pop(_key(session_id), None)

    def _forget_expired(self) -> None:
        now = time.monotonic()
        for key in [key for key, session in self._live.items() if session.expires <= now]:
            del self._live[key]
