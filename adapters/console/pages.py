"""The console's pages: sign in and out, and the shells ``static/console.js`` fills from the API.

Script, styles and icon come from the package, never another origin: the console works offline.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from html import escape
from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from actae.adapters.console.guards import PageSession, require_csrf, require_same_origin, session_of
from actae.adapters.console.state import COOKIE, SESSION_HOURS, Session, console_of

log = logging.getLogger("actae.console")

router = APIRouter(include_in_schema=False)

SECTIONS = (  # the navigation, a page each: path, page name, title
    ("/", "runs", "Runs"),
    ("/approvals", "approvals", "Approvals"),
    ("/effects", "effects", "Effects in doubt"),
    ("/audit", "audit", "Audit log"),
)
NO_STORE = {"Cache-Control": "no-store"}  # pages carry a CSRF token: never cached


def _attribute(name: str, value: str) -> str:
    """`` name="value"`` (escaped), or nothing for an empty value."""
    return f' {name}="{escape(value)}"' if value else ""


def _document(title: str, body: str, *, head: str = "", page: str = "") -> str:
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
{head}<title>{escape(title)} · Actae console</title>
<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/static/console.css">
</head>
<body{_attribute("data-page", page)}>
{body}
</body>
</html>
"""


def _shell(session: Session, page: str, title: str, *, run: str = "") -> HTMLResponse:
    user = session.user
    current = ' aria-current="page"'
    links = "".join(
        f'<a href="{path}"{current if name == page else ""}>{label}</a>'
        for path, name, label in SECTIONS
    )
    head = (
        f'<meta name="csrf-token" content="{escape(session.csrf)}">\n'
        '<script src="/static/console.js" defer></script>\n'
    )
    body = f"""<a class="skip" href="#main">Skip to content</a>
<header class="bar">
  <a class="brand" href="/"><img src="/static/favicon.svg" alt="" width="22" height="22">Actae</a>
  <nav aria-label="Sections">{links}</nav>
  <div class="who">
    <span>{escape(user.name)} <span class="role">{escape(user.role)}</span></span>
    <form method="post" action="/logout">
      <input type="hidden" name="csrf_token" value="{escape(session.csrf)}">
      <button type="submit" class="quiet">Sign out</button>
    </form>
  </div>
</header>
<main id="main" data-role="{escape(user.role)}" data-user="{escape(user.name)}"\
{_attribute("data-run", run)}>
  <h1>{escape(title)}</h1>
  <p id="notice" class="notice" role="status" aria-live="polite"></p>
  <div id="app"><p class="muted">Loading…</p></div>
  <noscript><p>The console draws its pages with JavaScript; the JSON API under /api works
  without it.</p></noscript>
</main>"""
    return HTMLResponse(_document(title, body, head=head, page=page), headers=NO_STORE)


def _sign_in_page(back_to: str, problem: str = "", status: int = 200) -> HTMLResponse:
    alert = f'<p class="problem" role="alert">{escape(problem)}</p>' if problem else ""
    body = f"""<main id="main" class="signin">
  <h1><img src="/static/favicon.svg" alt="" width="28" height="28"> Actae console</h1>
  <form method="post" action="/login">
    <label for="token">Access token</label>
    <input id="token" name="token" type="password" autocomplete="current-password"
      required autofocus spellcheck="false">
    <input type="hidden" name="next" value="{escape(back_to)}">
    {alert}
    <button type="submit">Sign in</button>
  </form>
  <p class="muted">A token comes from <code>actae console add-user NAME --role viewer|operator
  --auth-file FILE</code>, shown once.</p>
</main>"""
    return HTMLResponse(_document("Sign in", body), status_code=status, headers=NO_STORE)


def _local(path: str) -> str:
    # path if it is a path on this site, else "/": browsers drop tabs and line breaks and read
    # a backslash as a slash, so such a path could lead away.
    if (
        path.startswith("/")
        and not path.startswith("//")
        and "\\" not in path
        and path.isprintable()
        and not any(c.isspace() for c in path)
    ):
        return path
    return "/"


@router.get("/login")
def sign_in_form(request: Request, next: str = "/") -> Response:
    """The sign-in form (a signed-in browser goes straight on)."""
    if session_of(request) is not None:
        return RedirectResponse(_local(next), status_code=303)
    return _sign_in_page(_local(next))


@router.post("/login")
def sign_in(
    request: Request, token: Annotated[str, Form()], next: Annotated[str, Form()] = "/"
) -> Response:
    """Start a session for the token's user, only from this console's page (no login CSRF)."""
    require_same_origin(request)
    console = console_of(request)
    user = console.users.find(token.strip())
    if user is None:
        client = request.client.host if request.client else "?"
        log.warning("sign-in refused from %s: the token matches no user", client)
        return _sign_in_page(_local(next), "That token matches no user.", status=401)
    session_id, _ = console.sessions.start(user)
    log.info("%s (%s) signed in", user.name, user.role)
    response = RedirectResponse(_local(next), status_code=303)
    response.set_cookie(
        COOKIE,
        session_id,
        max_age=SESSION_HOURS * 3600,
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


@router.post("/logout")
def sign_out(request: Request, csrf_token: Annotated[str, Form()] = "") -> Response:
    """End the session (the form carries the CSRF token, as every change must)."""
    found = session_of(request)
    response = RedirectResponse("/login", status_code=303)
    if found is not None:
        session_id, session = found
        require_same_origin(request)
        require_csrf(session, csrf_token)
        console_of(request).sessions.end(session_id)
        log.info("%s signed out", session.user.name)
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
    return response


def _section(page: str, title: str) -> Callable[[PageSession], HTMLResponse]:
    def section(session: PageSession) -> HTMLResponse:
        return _shell(session, page, title)

    return section


for _path, _page, _title in SECTIONS:
    router.get(_path, name=f"{_page}_page")(_section(_page, _title))


@router.get("/runs/{run}")
def run_page(session: PageSession, run: str) -> HTMLResponse:
    """One run: timeline, state, diff, effects, lineage, audit and actions, live."""
    return _shell(session, "run", "Run", run=run)
