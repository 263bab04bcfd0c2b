"""How every refusal and failure looks to a client: one JSON shape, the right status.

The shape and the statuses: docs/console.md, "Errors".
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any
from urllib.parse import quote

from fastapi import Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse, Response
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from actae.adapters.persistence.outages import is_transient, summary
from actae.domain import errors as e

log = logging.getLogger("actae.console")

CONFLICTS = (
    e.ConflictError,
    e.OperationConflictError,
    e.IllegalTransitionError,  # NotWaitingError too: the run does not wait for that
    e.EffectBlockedError,  # an effect that is not in doubt cannot be overridden
    e.FencingError,
    e.LeaseHeldError,
    e.RetryNotDueError,
    e.RunStoppedError,
    e.IncompatibleResumeError,
    e.ContentionError,
    e.KeyringError,  # encrypted: the console was started without its keyring
)
STATUS_OF: tuple[tuple[type[e.ActaeError], int], ...] = (  # any other: 500, a bug
    (e.ValidationError, 422),
    (e.NotFoundError, 404),
    (e.ForgottenError, 410),  # its contents were destroyed for good
    *((kind, 409) for kind in CONFLICTS),
)


class Refused(Exception):  # noqa: N818 - an answer, as HTTPException is
    """A request the console will not serve: not signed in (401) or not allowed (403)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        self.status = status
        self.code = code
        super().__init__(message)


class SignInFirst(Exception):  # noqa: N818 - a redirect, not a failure
    """A page asked for without a session: the browser goes to ``/login`` and comes back."""

    def __init__(self, back_to: str) -> None:
        self.back_to = back_to
        super().__init__(back_to)


def answer(
    status: int, code: str, message: str, headers: Mapping[str, str] | None = None, /, **fields: Any
) -> JSONResponse:
    """An error in the one JSON shape of every error the console answers."""
    body = {"error": {"code": code, "message": message, **jsonable_encoder(fields)}}
    return JSONResponse(body, status_code=status, headers=headers)


def failure(method: str, path: str, error: Exception) -> Response:
    """The answer to an error no handler expected: 503 if waiting helps, else 500 (logged)."""
    if is_transient(error):
        log.warning("%s %s: the database is out of reach (%s)", method, path, summary(error))
        message = "the database is out of reach (restarting, or the network); try again shortly"
        return answer(503, "unavailable", message)
    log.error("%s %s failed: %s", method, path, summary(error), exc_info=error)
    return answer(500, "internal", "the console failed on this request; its log says why")


SECURITY_HEADERS = (  # every response's, streams and errors included: this origin's pages only
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        b"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
        b"frame-ancestors 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),  # under no-referrer our own forms send Origin: null
)


class Answers:
    """The outermost middleware: :data:`SECURITY_HEADERS` on every response, and :func:`failure`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on; add the headers as the response starts; answer what it raised."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception as error:
            if started:
                raise
            response = failure(scope["method"], scope["path"], error)
            await response(scope, receive, sending)


def _actae_error(request: Request, error: e.ActaeError) -> Response:
    status = next((status for kind, status in STATUS_OF if isinstance(error, kind)), 500)
    if status == 500:
        if is_transient(error):  # raised from the database going away: 503, as for any error
            return failure(request.method, request.url.path, error)
        log.error("%s %s failed: %s", request.method, request.url.path, error, exc_info=error)
    fields = {name: value for name, value in vars(error).items() if not name.startswith("_")}
    return answer(status, error.code, str(error), **fields)


def _invalid_request(request: Request, error: RequestValidationError) -> Response:
    problems = error.errors()
    first = problems[0] if problems else {"loc": (), "msg": "invalid request"}
    location = [str(part) for part in first.get("loc", ())]
    field = ".".join(location[1:] if len(location) > 1 else location) or "request"
    reason = str(first.get("msg", "invalid"))
    problem = e.ValidationError(field, reason)
    return answer(422, problem.code, str(problem), field=field, reason=reason)


def _refused(request: Request, error: Refused) -> Response:
    headers = {"WWW-Authenticate": 'Bearer realm="actae"'} if error.status == 401 else None
    return answer(error.status, error.code, str(error), headers)


def _http_error(request: Request, error: HTTPException) -> Response:
    phrase = HTTPStatus(error.status_code).phrase
    code = phrase.lower().replace(" ", "_").replace("-", "_")
    message = error.detail if error.detail != phrase else f"{phrase}: {request.url.path}"
    return answer(error.status_code, code, str(message), error.headers)


def _sign_in_first(request: Request, error: SignInFirst) -> Response:
    return RedirectResponse(f"/login?next={quote(error.back_to)}", status_code=303)


HANDLERS: dict[Any, Any] = {  # sync handlers: Starlette runs them in its thread pool
    e.ActaeError: _actae_error,
    RequestValidationError: _invalid_request,
    Refused: _refused,
    HTTPException: _http_error,
    SignInFirst: _sign_in_first,
}
