"""The ``actae`` command, and its one rule for failures: a user's error is one line, status 2."""

from __future__ import annotations

import importlib.metadata
import sqlite3
import sys
from collections.abc import Sequence

import click
import psycopg
from eventsourcing import persistence

from actae.adapters.cli import admin, inspecting, operating, running
from actae.adapters.cli.console import console
from actae.adapters.cli.opening import Invocation
from actae.adapters.persistence.libpq import name_connections
from actae.adapters.persistence.outages import missing_table, summary
from actae.adapters.persistence.url import parse_store_url
from actae.adapters.runtime.backends import backend_for
from actae.adapters.runtime.worker import CommitHook, Registry
from actae.domain.errors import ActaeError

CANNOT_OPEN = (  # the store cannot be opened or reached, at start or later: not a bug
    psycopg.OperationalError,  # connecting: refused, unknown host, bad password, no database
    psycopg.InterfaceError,
    sqlite3.DatabaseError,  # a file that cannot be opened or is not a database
    persistence.OperationalError,  # the same, met by eventsourcing after the store opened
    persistence.InterfaceError,
)


def _version() -> str:
    """The installed distribution's version; run from a source tree it has none."""
    try:
        return importlib.metadata.version("actae")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (the actae distribution is not installed)"


@click.group(
    commands=[
        running.demo,
        running.drill,
        running.project,
        running.worker,
        *inspecting.COMMANDS,
        *operating.COMMANDS,
        *admin.COMMANDS,
        console,
    ],
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(_version(), prog_name="actae", message="%(prog)s %(version)s")
def cli() -> None:
    """Durable execution for LLM-agent runs."""


def _cannot_open(db: str | None, error: Exception) -> str:
    """One line for a store that could not be opened: what failed, and what to check."""
    detail = (str(error).strip().splitlines() or [type(error).__name__])[0]
    if db is None:
        return f"cannot open or reach the store: {detail}"
    parsed = parse_store_url(db)
    password = parsed.postgres_conninfo.get("password")
    if password:
        detail = detail.replace(password, "***")
    hint = backend_for(parsed).open_hint
    return f"cannot open or reach the store at {parsed.display}: {detail}; {hint}"


def main(
    argv: Sequence[str] | None = None,
    *,
    registry: Registry | None = None,
    on_commit: CommitHook | None = None,
) -> int:
    """The CLI's exit status; ``registry``, ``on_commit``: a program's own (the drill's)."""
    given = Invocation(registry=registry, on_commit=on_commit)
    name_connections("actae-cli")  # the long-running commands name theirs
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        status = cli.main(args, prog_name="actae", standalone_mode=False, obj=given)
    except click.exceptions.Exit as stop:  # --help, --version
        return stop.exit_code
    except Exception as error:
        failure = _failure(error, given.db)
        if failure is None:
            raise
        line, code = failure
        print(line, file=sys.stderr)
        return code
    return status if isinstance(status, int) else 0


def _failure(error: Exception, db: str | None) -> tuple[str, int] | None:
    """The one line and exit status for an error a user can cause; ``None`` for a bug."""
    if isinstance(error, click.UsageError):  # one line, no usage block
        prog = error.ctx.command_path if error.ctx is not None else "actae"
        message = " ".join(error.format_message().split())
        return f"{prog}: error: {message} (see {prog} --help)", 2
    if isinstance(error, click.Abort):  # Ctrl-C outside a command's own signal handling
        return "actae: interrupted", 130
    if isinstance(error, ActaeError):
        return f"actae: error: {error}", 2
    if isinstance(error, CANNOT_OPEN):
        return f"actae: error: {_cannot_open(db, error)}", 2
    if missing_table(error):
        return f"actae: error: no Actae store here any more: {summary(error)}", 2
    return None


if __name__ == "__main__":
    raise SystemExit(main())
