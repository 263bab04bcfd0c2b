"""The options commands share, and the value types that give a one-line error when wrong."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar

import click

from actae.adapters.cli.opening import DB_ENV, Invocation
from actae.adapters.operate import views

F = TypeVar("F", bound=Callable[..., Any])

INT64 = 2**63 - 1
"""Cursors, positions and counts are stored as signed 64-bit integers."""


def whole(minimum: int, maximum: int = INT64) -> click.IntRange:
    """A whole number in ``[minimum, maximum]``."""
    return click.IntRange(minimum, maximum)


class Seconds(click.ParamType[float, Any]):
    """A finite number of seconds above 0 and at most ``maximum`` (``nan`` and ``inf`` refused)."""

    name = "seconds"

    def __init__(self, maximum: float) -> None:
        self.maximum = maximum

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        """``value`` as seconds, or a usage error naming the option."""
        if isinstance(value, float):
            return value
        try:
            seconds = float(value)
        except ValueError:
            self.fail(f"expected seconds, got {value!r}", param, ctx)
        if not (math.isfinite(seconds) and 0 < seconds <= self.maximum):
            self.fail(f"must be above 0 and at most {self.maximum:g}, got {value}", param, ctx)
        return seconds


def store_options(*, required: bool) -> Callable[[F], F]:
    """``--db URL`` and ``--db-file PATH``, kept on the ``Invocation`` (``invocation().url()``)."""
    default = f"${DB_ENV}" if required else f"${DB_ENV}, else SQLite in a temporary folder"

    def decorate(command: F) -> F:
        command = click.option(
            "--db-file",
            metavar="PATH",
            expose_value=False,
            callback=_kept("db_file"),
            help="a file whose first line is the store URL (used when --db is not given)",
        )(command)
        return click.option(
            "--db",
            metavar="URL",
            expose_value=False,
            callback=_kept("db_given"),
            help=f"store URL, e.g. sqlite:///runs.db (default: {default})",
        )(command)

    return decorate


def _kept(name: str) -> Callable[[click.Context, click.Parameter, str | None], None]:
    def keep(ctx: click.Context, _: click.Parameter, value: str | None) -> None:
        setattr(ctx.find_root().ensure_object(Invocation), name, value)

    return keep


wait_for_db = click.option(
    "--wait-for-db",
    metavar="SECONDS",
    type=Seconds(86_400.0),
    default=None,
    help="if the database is unreachable at start, wait up to SECONDS for it (for "
    "supervisors restarting processes during an outage; default: fail at once). Once "
    "running, outages are always waited out",
)
log_format = click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="how log lines on stderr look: text (the message, then time, level, logger and "
    "fields such as worker and run_id), or json (one JSON object per line)",
)
page_limit = click.option(
    "--limit", type=whole(1, views.MOST), default=views.PAGE, show_default=True
)
as_json = click.option("--json", "as_json", is_flag=True, help="print JSON for scripts")
actor = click.option(
    "--as",
    "actor",
    required=True,
    metavar="ACTOR",
    help="who is acting (recorded in the audit log)",
)
