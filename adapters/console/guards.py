"""Who is asking, and may they: the console's three rules, each in one place.

1. **Identity.** An API client sends ``Authorization: Bearer <token>``; a browser sends the
   session cookie it got at ``/login``. Neither, or a token or session that is not known:
   401 (a page redirects to ``/login`` instead).
2. **CSRF.** A browser's cookie goes with every request to this origin, even one another
   site's page makes it send; so a change (any method but GET, HEAD, OPTIONS) that comes with
   the cookie must also carry the session's CSRF token in ``X-CSRF-Token``, which only this
   console's own pages know (they get it in a meta tag). Missing or wrong: 403. A bearer token
   is never sent by a browser on its own, so it needs no CSRF token. Before that, a second
   layer, and the only one for signing in (no session, so no CSRF token yet, and a forged
   sign-in would act as the forger's user): a browser's ``POST`` whose ``Origin`` is another
   origin, or whose ``Sec-Fetch-Site`` says another site, is refused (403 ``cross_origin``).
   "Another origin" is decided against the console's configured address (its host and port,
   and ``--origin``), never against the request's ``Host`` header: a page that had a
   browser reach the console under its own name (DNS rebinding) sends a ``Host`` that
   matches its ``Origin``.
3. **Role.** Only an operator acts; a viewer's change is refused with 403.

The actor recorded for every action is the user these rules found, never anything the
request says about itself.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Iterable
from typing import Annotated
from urllib.parse import urlsplit

from fastapi import Depends, Request

from actae.adapters.console.auth import User
from actae.adapters.console.errors import Refused, SignInFirst
from actae.adapters.console.sessions import COOKIE, Session
from actae.adapters.console.state import console_of
from actae.domain.errors import ValidationError

CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
DEFAULT_PORTS = {"http": ":80", "https": ":443"}
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
"""What a browser on the console's own machine may call a console bound to loopback."""


def _origin(scheme: str, host: str) -> str:
    """``scheme://host`` in lower case, without the scheme's default port."""
    scheme, host = scheme.lower(), host.lower()
    default = DEFAULT_PORTS.get(scheme)
    if default is not None and host.endswith(default):
        host = host[: -len(default)]
    return f"{scheme}://{host}"


def parse_origin(text: str) -> str:
    """``scheme://host[:port]`` of an origin given by the operator (``--origin``), normalised."""
    parts = urlsplit(text.strip())
    if (
        parts.scheme not in DEFAULT_PORTS
        or not parts.hostname
        or parts.username is not None
        or parts.path not in ("", "/")
        or parts.query
        or parts.fragment
    ):
        raise ValidationError(
            "origin", f"expected the address browsers use, as http(s)://HOST[:PORT], got {text!r}"
        )
    return _origin(parts.scheme, parts.netloc)


def own_origins(host: str, port: int, extra: Iterable[str] = ()) -> frozenset[str]:
    """The origins of a console listening on ``host``:``port``, plus ``extra`` (``--origin``).

    A loopback address may be reached under any of :data:`LOOPBACK_NAMES`; an address that
    listens on every interface (``0.0.0.0``, ``::``) has no name a browser is known to use,
    so only its loopback names and ``extra`` count.
    """
    shown = f"[{host}]" if ":" in host else host
    names = [shown]
    if _wildcard(host):
        names = list(LOOPBACK_NAMES)
    elif loopback(host):
        names = [shown, *LOOPBACK_NAMES]
    found = {_origin("http", f"{name}:{port}") for name in names}
    return frozenset(found | {parse_origin(origin) for origin in extra})


def loopback(host: str) -> bool:
    """Whether ``host`` names this machine (a loopback address, or ``localhost``)."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host.lower() == "localhost"


def _wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def require_same_origin(request: Request) -> None:
    """Refuse (403) a browser's change that another site's page made it send.

    Refused: ``Sec-Fetch-Site`` other than ``same-origin`` or ``none`` (a browser says so,
    and no script can forge it), or an ``Origin`` that is not one of this console's (its
    configured host and port, or an ``--origin``; never the request's ``Host`` header).
    ``Origin: null`` passes only with ``Sec-Fetch-Site: same-origin`` (a privacy setting may
    hide a page's own origin). A request with neither header (curl, a script) is let
    through: browsers send them with every ``POST``.
    """
    site = request.headers.get("sec-fetch-site", "").strip().lower()
    if site and site not in ("same-origin", "none"):
        raise Refused(403, "cross_origin", f"a change from a {site} page is refused")
    origin = request.headers.get("origin")
    if origin is None or (origin.strip() == "null" and site == "same-origin"):
        return
    scheme, _, host = origin.strip().partition("://")
    own = console_of(request).origins
    if not host or _origin(scheme, host) not in own:
        raise Refused(
            403,
            "cross_origin",
            f"a change from origin {origin!r} is refused; this console is "
            f"{', '.join(sorted(own))} (actae console --origin adds the one browsers use)",
        )


def require_csrf(session: Session, presented: str | None) -> None:
    """Refuse (403) a change from a browser that does not carry its session's CSRF token."""
    if presented is None or not hmac.compare_digest(presented.encode(), session.csrf.encode()):
        raise Refused(
            403,
            "csrf",
            f"a change made with the session cookie must carry the page's {CSRF_HEADER} "
            "header; reload the page and try again",
        )


def session_of(request: Request) -> tuple[str, Session] | None:
    """The browser's live session (its id and the session), if it has one."""
    session_id = request.cookies.get(COOKIE)
    session = console_of(request).sessions.find(session_id) if session_id else None
    return None if session_id is None or session is None else (session_id, session)


def identify(request: Request) -> User:
    """The signed-in user making ``request`` (rules 1 and 2), else 401 or 403."""
    header = request.headers.get("authorization")
    if header is not None:
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Refused(401, "unauthorized", "expected Authorization: Bearer <token>")
        user = console_of(request).users.find(token.strip())
        if user is None:
            raise Refused(401, "unauthorized", "the bearer token matches no user")
        return user
    found = session_of(request)
    if found is None:
        raise Refused(
            401, "unauthorized", "sign in at /login, or send Authorization: Bearer <token>"
        )
    session = found[1]
    if request.method not in SAFE_METHODS:
        require_same_origin(request)
        require_csrf(session, request.headers.get(CSRF_HEADER))
    return session.user


def require_operator(user: Annotated[User, Depends(identify)]) -> User:
    """The signed-in user if they may act (rule 3), else 403."""
    if not user.may_act:
        raise Refused(403, "forbidden", f"{user.name} is a viewer; only an operator may act")
    return user


def page_session(request: Request) -> Session:
    """The session of a browser asking for a page; without one, off to ``/login`` and back."""
    found = session_of(request)
    if found is None:
        back_to = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        raise SignInFirst(back_to)
    return found[1]


Viewer = Annotated[User, Depends(identify)]
"""Any signed-in user (a route parameter)."""
Operator = Annotated[User, Depends(require_operator)]
"""A signed-in operator: the actor of an action (a route parameter)."""
PageSession = Annotated[Session, Depends(page_session)]
"""The session of a browser asking for a page (a route parameter)."""
