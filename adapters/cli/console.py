"""``actae console`` and ``add-user``: the server stack (``actae[console]``) imported when run."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import click

from actae.adapters.cli.opening import invocation, log_format, store_options, whole
from actae.adapters.console.auth import NO_USERS, ROLES  # the auth file's module: no server stack
from actae.adapters.logs import configure
from actae.adapters.persistence.libpq import name_connections
from actae.domain.errors import ValidationError

EXTRA = "pip install 'actae[console]'"
MAX_BODY = 1024 * 1024  # limits.MAX_BODY, which needs the extra
STACK = {
    "fastapi": "fastapi",
    "uvicorn": "uvicorn",
    "python_multipart": "python-multipart",
    "prometheus_client": "prometheus-client",
}


def _room(module: str) -> ModuleType:
    """``actae.adapters.console.<module>``, or a clear error if the extra is not installed."""
    missing = [package for name, package in STACK.items() if importlib.util.find_spec(name) is None]
    if missing:
        raise ValidationError(
            "console", f"the console needs {', '.join(missing)}, not installed here: {EXTRA}"
        )
    return importlib.import_module(f"actae.adapters.console.{module}")


@click.group(
    invoke_without_command=True,
    help="Serve the web console and its HTTP API (JSON under /api, live updates, /metrics) "
    "for the store. Needs an auth file (see add-user); binds to 127.0.0.1 unless told "
    "otherwise. See docs/console.md.",
    short_help="Serve the web console and HTTP API.",
)
@store_options(required=True)
@click.option("--host", default="127.0.0.1", show_default=True, help="address to listen on")
@click.option("--port", type=whole(1, 65_535), default=8080, show_default=True)
@click.option(
    "--auth-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="JSON file of users and their token hashes (made by `actae console add-user`)",
)
@click.option(
    "--max-body",
    type=whole(1),
    default=MAX_BODY,
    show_default=True,
    help="largest request body in bytes; a larger one is answered 413 before it is read",
)
@click.option(
    "--origin",
    "origins",
    multiple=True,
    metavar="URL",
    help="an address browsers reach the console at besides its own (behind a reverse "
    "proxy: https://console.example.com); repeatable",
)
@log_format
@click.pass_context
def console(ctx: click.Context, /, auth_file: Path | None, log_format: str, **served: Any) -> int:
    """``actae console`` (``served``: how, as ``serve`` takes it), or its subcommand."""
    if ctx.invoked_subcommand is not None:
        return 0
    url = invocation().required_url()
    if auth_file is None:
        raise ValidationError("--auth-file", NO_USERS)
    configure(json=log_format == "json")
    name_connections("actae-console")
    _room("server").serve(url, auth_file=auth_file, **served)
    return 0


@console.command(
    "add-user",
    help="Add a user (or give one a new token) in the auth file. Prints the token once; "
    "the file keeps only its SHA-256 hash.",
)
@click.argument("name")
@click.option(
    "--role", type=click.Choice(ROLES), required=True, help="viewer reads; operator also acts"
)
@click.option("--auth-file", type=click.Path(dir_okay=False, path_type=Path), required=True)
def add_user(name: str, role: str, auth_file: Path) -> int:
    """``actae console add-user NAME``."""
    token = _room("auth").add_user(auth_file, name, role)
    click.echo(token)
    return 0
