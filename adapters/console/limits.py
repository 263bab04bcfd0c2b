"""A cap on request bodies, applied before anything reads one (authentication included).

FastAPI reads a body before the route's dependencies run, so without a cap an
unauthenticated client could make the console hold any number of bytes before its 401. An
over-long ``Content-Length`` is answered 413 unread; a chunked body is read here up to the
cap, then handed on as if it came from the client, or answered 413 once it passes the cap.
"""

from __future__ import annotations

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from actae.adapters.console.errors import answer

MAX_BODY = 1024 * 1024
"""The default cap on a request's body, in bytes (1 MiB; ``actae console --max-body``)."""


def declared_length(scope: Scope) -> int | None:
    """The request's ``Content-Length``, if it has one (the server already checked its form)."""
    lengths = [int(value) for name, value in scope.get("headers", []) if name == b"content-length"]
    return lengths[0] if lengths else None


def too_large(max_body: int) -> JSONResponse:
    """The answer to a body over the cap: 413 in the console's shape, then the connection ends."""
    message = (
        f"the request body is over the console's limit of {max_body} bytes "
        "(actae console --max-body); nothing past the limit was read"
    )
    return answer(413, "payload_too_large", message, {"connection": "close"}, max_body=max_body)


class BodyLimit:
    """Answers 413 to a request whose body is over ``max_body`` bytes, reading no further."""

    def __init__(self, app: ASGIApp, max_body: int = MAX_BODY) -> None:
        self.app = app
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse an oversized body before the app sees the request; else pass it on."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = declared_length(scope)
        read: list[Message] | None
        if declared is not None and declared > self.max_body:
            read = None
        elif declared is not None:  # the server stops at the declared length itself
            read = []
        else:
            read = await self._read_capped(receive)
        if read is None:
            await too_large(self.max_body)(scope, receive, send)
        else:
            await self.app(scope, _replay(read, receive), send)

    async def _read_capped(self, receive: Receive) -> list[Message] | None:
        """A body of unknown length, read up to the cap (None: it passed the cap)."""
        messages: list[Message] = []
        size = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":  # the client went away: the app hears it
                return messages
            size += len(message.get("body", b""))
            if size > self.max_body:
                return None
            if not message.get("more_body", False):
                return messages


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """``receive`` that first gives back ``messages``, then waits on the client again."""
    pending = list(messages)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed
