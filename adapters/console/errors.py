"""How every refusal and failure looks to a client: one JSON shape, the right status.

``{"error": {"code": ..., "message": ..., <the error's fields>}}``. Actae's own errors keep
their code and structured attributes (a ``ValidationError``'s ``field`` and ``reason``, an
``IllegalTransitionError``'s ``status`` and ``action``) and get the status that says what
to do: 422 fix the input, 404 no such thing, 409 not in a state that allows it (reload and
decide again). FastAPI's own request checks answer 422 in the same shape, as a
``ValidationError`` would. Pages that need a signed-in browser redirect to ``/login``.

Anything else that goes wrong answers in the same shape too (:class:`Answers`): 503
``unavailable`` for an error that waiting makes go away (the database restarting or out of
reach, as :func:`actae.adapters.persistence.outages.is_transient` classifies them), else 500
``internal`` with the details in the log only. The same middleware adds the security
headers, so these answers carry them as every other one does.
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse, Response
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from actae.adapters.persistence.outages import is_transient, summary
from actae.domain.errors import (
    ActaeError,
    ConflictError,
    ContentionError,
    EffectBlockedError,
    FencingError,
    ForgottenError,
    IllegalTransitionError,
    IncompatibleResumeError,
    KeyringError,
    LeaseHeldError,
    NotFoundError,
    OperationConflictError,
    RetryNotDueError,
    RunStoppedError,
    ValidationError,
)

log = logging.getLogger("actae.console")

STATUS_OF: tuple[tuple[type[ActaeError], int], ...] = (
    (ValidationError, 422),
    (NotFoundError, 404),
    (ConflictError, 409),
    (OperationConflictError, 409),
    (IllegalTransitionError, 409),  # NotWaitingError too: the run does not wait for that
    (EffectBlockedError, 409),  # an effect that is not in doubt cannot be overridden
    (FencingError, 409),
    (LeaseHeldError, 409),
    (RetryNotDueError, 409),
    (RunStoppedError, 409),
    (IncompatibleResumeError, 409),
    (ContentionError, 409),
    (ForgottenError, 410),  # its contents were destroyed for good
    (KeyringError, 409),  # encrypted: the console was started without its keyring
)
"""The HTTP status of each kind of Actae error (any other one is a 500: a bug or corruption)."""


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


def status_of(error: ActaeError) -> int:
    """The HTTP status that answers ``error``."""
    return next((status for kind, status in STATUS_OF if isinstance(error, kind)), 500)


def error_body(code: str, message: str, **fields: Any) -> dict[str, Any]:
    """The one JSON shape of every error the console answers."""
    return {"error": {"code": code, "message": message, **jsonable_encoder(fields)}}


def _fields(error: ActaeError) -> dict[str, Any]:
    return {name: value for name, value in vars(error).items() if not name.startswith("_")}


def failure(method: str, path: str, error: Exception) -> Response:
    """The answer to an error no handler expected: 503 if waiting helps, else 500 (logged)."""
    if is_transient(error):
        log.warning("%s %s: the database is out of reach (%s)", method, path, summary(error))
        return JSONResponse(
            error_body(
                "unavailable",
                "the database is out of reach (restarting, or the network); try again shortly",
            ),
            status_code=503,
        )
    log.error("%s %s failed: %s", method, path, summary(error), exc_info=error)
    return JSONResponse(
        error_body("internal", "the console failed on this request; its log says why"),
        status_code=500,
    )


SECURITY_HEADERS = (
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        b"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
        b"frame-ancestors 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
)
"""Every HTTP response's headers (streams and errors included): this origin's pages only."""


class Answers:
    """The outermost middleware: :data:`SECURITY_HEADERS` on every response, and :func:`failure`.

    It answers an exception no handler took, before the response started. Starlette's own
    last resort answers in plain text, outside every middleware (so without the security
    headers), and re-raises. An exception after the response started (a stream cut short) is
    re-raised: there is nothing left to answer with.
    """

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


def _actae_error(request: Request, error: ActaeError) -> Response:
    status = status_of(error)
    if status == 500:
        if is_transient(error):  # raised from the database going away: 503, as for any error
            return failure(request.method, request.url.path, error)
        log.error("%s %s failed: %s", request.method, request.url.path, error, exc_info=error)
    return JSONResponse(error_body(error.code, str(error), **_fields(error)), status_code=status)


def _invalid_request(request: Request, error: RequestValidationError) -> Response:
    problems = error.errors()
    first = problems[0] if problems else {"loc": (), "msg": "invalid request"}
    location = [str(part) for part in first.get("loc", ())]
    field = ".".join(location[1:] if len(location) > 1 else location) or "request"
    reason = str(first.get("msg", "invalid"))
    problem = ValidationError(field, reason)
    return JSONResponse(
        error_body(problem.code, str(problem), field=field, reason=reason), status_code=422
    )


def _refused(request: Request, error: Refused) -> Response:
    headers = {"WWW-Authenticate": 'Bearer realm="actae"'} if error.status == 401 else None
    return JSONResponse(
        error_body(error.code, str(error)), status_code=error.status, headers=headers
    )


def _http_error(request: Request, error: HTTPException) -> Response:
    phrase = HTTPStatus(error.status_code).phrase
    code = phrase.lower().replace(" ", "_").replace("-", "_")
    message = error.detail if error.detail != phrase else f"{phrase}: {request.url.path}"
    return JSONResponse(
        error_body(code, str(message)), status_code=error.status_code, headers=error.headers
    )


def _sign_in_first(request: Request, error: SignInFirst) -> Response:
    return RedirectResponse(f"/login?next={quote(error.back_to)}", status_code=303)


def install(app: FastAPI) -> None:
    """Answer every error of ``app`` in the console's shape."""
    app.exception_handler(ActaeError)(_actae_error)
    app.exception_handler(RequestValidationError)(_invalid_request)
    app.exception_handler(Refused)(_refused)
    app.exception_handler(HTTPException)(_http_error)
    app.exception_handler(SignInFirst)(_sign_in_first)
