"""Who is asking, and may they: the console's three rules, each in one place.

1. **Identity.** An API client sends ``Authorization: Bearer <token>``; a browser sends the
   session cookie it got at ``/login``. Neither, or a token or session that is not known:
   401 (a page redirects to ``/login`` instead).
2. **CSRF.** A browser's cookie goes with every request to this origin, even one another
   site's page makes it send; so a change (any method but GET, HEAD, OPTIONS) that comes with
   the cookie must also carry the session's CSRF token in ``X-CSRF-Token``, which only this
   console's own pages know (they get it in a meta tag). Missing or wrong: 403. A bearer token
   is never sent by a browser on its own, so it needs no CSRF token.
3. **Role.** Only an operator acts; a viewer's change is refused with 403.

The actor recorded for every action is the user these rules found, never anything the
request says about itself.
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, Request

from actae.adapters.console.auth import User
from actae.adapters.console.errors import Refused, SignInFirst
from actae.adapters.console.sessions import COOKIE, Session
from actae.adapters.console.state import console_of

CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


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
