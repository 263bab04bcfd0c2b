"""The options commands share, and which store they open (docs/cli.md).

A file or the environment keeps a URL's password out of ``ps`` and shell history; only the
command reads the environment (never the library), so an error can name the store meant.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click

from actae.adapters.operate import views
from actae.adapters.persistence.outages import Outage, ride_out
from actae.adapters.persistence.url import parse_store_url
from actae.adapters.runtime.store import Store
from actae.adapters.runtime.store import open as open_store
from actae.adapters.runtime.worker import CommitHook, Registry
from actae.domain.errors import ValidationError

DB_ENV = "ACTAE_DB"

log = logging.getLogger("actae.cli")


def store_url(
    db: str | None, db_file: str | None, environ: Mapping[str, str], *, required: bool
) -> str | None:
    """``--db``, else ``--db-file``'s first line, else ``$ACTAE_DB`` (``None``: none given)."""
    if db is not None:
        return db
    if db_file is not None:
        try:
            with Path(db_file).open(encoding="utf-8") as file:
                url = file.readline(64 * 1024).strip()
        except (OSError, UnicodeDecodeError) as error:
            reason = getattr(error, "strerror", None) or "not UTF-8 text"
            raise ValidationError("--db-file", f"cannot read {db_file}: {reason}") from None
        if not url:
            raise ValidationError("--db-file", f"the first line of {db_file} holds no store URL")
        return url
    if environ.get(DB_ENV):
        return environ[DB_ENV].strip()
    if required:
        raise ValidationError(
            "--db", f"no store given: use --db URL, --db-file PATH or set {DB_ENV}"
        )
    return None


@dataclass
class Invocation:
    """The workflows and hook a program gave ``main``, and the store a command chose."""

    registry: Registry | None = None
    on_commit: CommitHook | None = None
    db: str | None = None
    db_given: str | None = None  # --db
    db_file: str | None = None

    def url(self, *, required: bool = True) -> str | None:
        """The store URL, checked before any work starts."""
        self.db = store_url(self.db_given, self.db_file, os.environ, required=required)
        if self.db is not None:
            parse_store_url(self.db)
        return self.db

    def required_url(self) -> str:
        """:meth:`url`, for a command that needs a store."""
        url = self.url(required=True)
        assert url is not None  # noqa: S101 - store_url raises rather than return None here
        return url


def invocation() -> Invocation:
    """The :class:`Invocation` of the running command (the one ``main`` made)."""
    return click.get_current_context().find_root().ensure_object(Invocation)


def open_waiting(
    url: str, who: str, prepare: Callable[[Store], object], *, within: float, **options: Any
) -> Store:
    """The store, ``prepare``d, waiting ``within`` seconds through an outage (``--wait-for-db``).

    A supervisor restarts a process during an outage; someone at a terminal wants the error.
    """

    def attempt() -> Store:
        store = open_store(url, **options)
        try:
            prepare(store)
        except BaseException:
            store.close()
            raise
        return store

    outage = Outage(f"actae {who}", log.warning)
    return ride_out(attempt, outage, within=within)


F = TypeVar("F", bound=Callable[..., Any])

INT64 = 2**63 - 1  # cursors, positions and counts are stored as signed 64-bit integers


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

    def kept(name: str) -> Callable[[click.Context, click.Parameter, str | None], None]:
        return lambda ctx, _, value: setattr(ctx.find_root().ensure_object(Invocation), name, value)

    default = f"${DB_ENV}" if required else f"${DB_ENV}, else SQLite in a temporary folder"
    db = click.option(
        "--db",
        metavar="URL",
        expose_value=False,
        callback=kept("db_given"),
        help=f"store URL, e.g. sqlite:///runs.db (default: {default})",
    )
    db_file = click.option(
        "--db-file",
        metavar="PATH",
        expose_value=False,
        callback=kept("db_file"),
        help="a file whose first line is the store URL (used when --db is not given)",
    )
    return lambda command: decorated(command, db, db_file)


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
reason = click.option("--reason", required=True, help="why (recorded in the audit log)")


def decorated(command: F, *decorators: Callable[[Any], Any]) -> F:
    """``command`` under ``decorators``, listed as they would stand above it."""
    for decorator in reversed(decorators):
        command = decorator(command)
    return command
