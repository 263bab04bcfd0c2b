"""Which store a command uses (``--db URL``, ``--db-file PATH`` or ``$ACTAE_DB``), and opening it.

A URL can hold a password, and a command line is visible to every user of the machine
(``ps``) and kept in shell history; a file or the environment is not. Exactly one source
wins, by a fixed precedence, so a command never mixes two. The library itself never reads
the environment: only the command does, here.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from actae.adapters.persistence.outages import Outage, ride_out
from actae.adapters.runtime.store import Store
from actae.adapters.runtime.store import open as open_store
from actae.domain.errors import ValidationError

DB_ENV = "ACTAE_DB"
"""The environment variable the command (never the library) reads a store URL from."""

log = logging.getLogger("actae.cli")


def add_store_options(command: argparse.ArgumentParser, *, required: bool) -> None:
    """``--db URL``, ``--db-file PATH`` or ``$ACTAE_DB``, in that order of precedence.

    A file or the environment keeps a password out of the process list and shell history.
    """
    command.set_defaults(store_required=required)
    default = f"${DB_ENV}" if required else f"${DB_ENV}, else SQLite in a temporary folder"
    command.add_argument(
        "--db", metavar="URL", help=f"store URL, e.g. sqlite:///runs.db (default: {default})"
    )
    command.add_argument(
        "--db-file",
        metavar="PATH",
        help="a file whose first line is the store URL (used when --db is not given)",
    )


def read_db_file(path: str) -> str:
    """The URL on the first line of ``path`` (surrounding whitespace ignored)."""
    try:
        with Path(path).open(encoding="utf-8") as file:
            url = file.readline(64 * 1024).strip()
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or "not UTF-8 text"
        raise ValidationError("--db-file", f"cannot read {path}: {reason}") from None
    if not url:
        raise ValidationError("--db-file", f"the first line of {path} holds no store URL")
    return url


def store_url(args: argparse.Namespace, environ: Mapping[str, str]) -> str | None:
    """The one store URL the command uses: ``--db``, else ``--db-file``, else ``$ACTAE_DB``.

    ``None`` lets ``demo`` and ``drill`` use their temporary SQLite store; the other
    commands need a store and refuse to guess one.
    """
    if args.db is not None:
        return str(args.db)
    if args.db_file is not None:
        return read_db_file(args.db_file)
    if environ.get(DB_ENV):
        return environ[DB_ENV].strip()
    if args.store_required:
        raise ValidationError(
            "--db", f"no store given: use --db URL, --db-file PATH or set {DB_ENV}"
        )
    return None


def open_waiting(
    args: argparse.Namespace, who: str, prepare: Callable[[Store], object], **options: Any
) -> Store:
    """The store (and what ``prepare`` opens on it), waited for through a database outage.

    A supervisor restarts a long-running process during an outage as readily as after one:
    with ``--wait-for-db SECONDS`` it waits that long, saying so once. Anything but an
    outage (a bad password, no such database or store) fails at once, and so does an
    outage without the option: someone at a terminal wants the error, not a wait.
    """

    def attempt() -> Store:
        store = open_store(args.db, **options)
        try:
            prepare(store)
        except BaseException:
            store.close()
            raise
        return store

    outage = Outage(f"actae {who}", log.warning)
    return ride_out(attempt, outage, within=args.wait_for_db)
