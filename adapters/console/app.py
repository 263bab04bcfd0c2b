"""The console as an ASGI app: the API, the pages, ``/metrics`` and the static assets.

Every response carries headers that keep the pages to this origin (``errors.Answers``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from actae.adapters.console import api, errors, metrics, pages
from actae.adapters.console.auth import Users
from actae.adapters.console.guards import own_origins, parse_origin
from actae.adapters.console.limits import MAX_BODY, BodyLimit
from actae.adapters.console.state import Console
from actae.adapters.runtime.store import Store
from actae.adapters.telemetry.names import SCOPE_VERSION

STATIC = Path(__file__).parent / "static"


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    console: Console = app.state.console
    await console.open()
    try:
        yield
    finally:
        await console.close()


def create_app(
    store: Store, users: Users, *, max_body: int = MAX_BODY, origins: Iterable[str] | None = None
) -> FastAPI:
    """The console over ``store`` (which it closes when it stops), for ``users`` at ``origins``."""
    app = FastAPI(
        title="Actae console",
        version=SCOPE_VERSION,  # the distribution's, as telemetry reports it
        description="Runs, effects, approvals and operator actions of an Actae store "
        "(docs/console.md). Authenticate with `Authorization: Bearer <token>`.",
        openapi_url="/api/openapi.json",
        docs_url=None,  # Swagger UI and ReDoc load from a CDN: the console works offline
        redoc_url=None,
        lifespan=_lifespan,
        exception_handlers=errors.HANDLERS,
    )
    own = own_origins("127.0.0.1", 8080) if origins is None else map(parse_origin, origins)
    console = Console(store=store, users=users, origins=frozenset(own))
    app.state.console = console
    app.state.metrics = metrics.registry_for(console)
    app.include_router(api.router)
    app.include_router(metrics.router)
    app.include_router(pages.router)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    app.add_middleware(BodyLimit, max_body=max_body)  # before any route reads a body
    app.add_middleware(errors.Answers)  # added last: the outermost
    return app
