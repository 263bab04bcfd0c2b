"""A cap on request bodies, applied before anything reads one (authentication included).

FastAPI reads a body before the route's dependencies run, so without a cap an
unauthenticated client could make the console hold any number of bytes before its 401.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from actae.adapters.console.errors import answer

MAX_BODY = 1024 * 1024  # bytes, actae console --max-body
CLOSE = {"connection": "close"}


class BodyLimit:
    """Answers 413 to a body over ``max_body`` bytes, reading no further (chunked: to the cap)."""

    def __init__(self, app: ASGIApp, max_body: int = MAX_BODY) -> None:
        self.app = app
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse an oversized body before the app sees the request; else pass it on."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        lengths = [
            int(value) for name, value in scope.get("headers", []) if name == b"content-length"
        ]
        declared = lengths[0] if lengths else None  # the server checked its form
        read: list[Message] | None
        if declared is not None and declared > self.max_body:
            read = None
        elif declared is not None:  # the server stops at the declared length itself
            read = []
        else:
            read = await self._read_capped(receive)
        if read is None:
            message = (
                f"the request body is over the console's limit of {self.max_body} bytes "
                "(actae console --max-body); nothing past the limit was read"
            )
            too_large = answer(413, "payload_too_large", message, CLOSE, max_body=self.max_body)
            await too_large(scope, receive, send)
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
        return pending.pop(0) if pending else await receive()

    return replayed
