"""Who is asking, and may they: the console's three rules, each in one place (docs/console.md).

1. **Identity** (a token or the session cookie), 2. **CSRF** (a cookie's change carries the
session's token, from the console's configured origin, never ``Host``: DNS rebinding forges
it), 3. **Role** (only an operator acts).
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
from actae.adapters.console.state import COOKIE, Session, console_of
from actae.domain.errors import ValidationError

CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
DEFAULT_PORTS = {"http": ":80", "https": ":443"}
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")  # a console bound to loopback, or 0.0.0.0


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
    """The origins of a console listening on ``host``:``port``, plus ``extra`` (``--origin``)."""
    shown = f"[{host}]" if ":" in host else host
    address = _address(host)
    if address is not None and address.is_unspecified:
        names: tuple[str, ...] = LOOPBACK_NAMES
    else:
        names = (shown, *LOOPBACK_NAMES) if loopback(host) else (shown,)
    found = {_origin("http", f"{name}:{port}") for name in names}
    return frozenset(found | {parse_origin(origin) for origin in extra})


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def loopback(host: str) -> bool:
    """Whether ``host`` names this machine (a loopback address, or ``localhost``)."""
    address = _address(host)
    return host.lower() == "localhost" if address is None else address.is_loopback


def require_same_origin(request: Request) -> None:
    """Refuse (403) a browser's change that another site's page made it send.

    ``Origin: null`` passes only with ``Sec-Fetch-Site: same-origin``, which no script can
    forge; neither header (curl, a script): browsers send one with a POST.
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
Operator = Annotated[User, Depends(require_operator)]
PageSession = Annotated[Session, Depends(page_session)]
