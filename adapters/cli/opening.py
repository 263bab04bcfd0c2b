"""Which store a command uses (``--db URL``, ``--db-file PATH`` or ``$ACTAE_DB``), and opening it.

A URL can hold a password, and a command line is visible to every user of the machine
(``ps``) and kept in shell history; a file or the environment is not. Exactly one source
wins, by a fixed precedence, so a command never mixes two. The library itself never reads
the environment: only the command does, here.
"""

from __future__ import annotations

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


def store_url(
    db: str | None, db_file: str | None, environ: Mapping[str, str], *, required: bool
) -> str | None:
    """The one store URL the command uses: ``--db``, else ``--db-file``, else ``$ACTAE_DB``.

    ``None`` lets ``demo`` and ``drill`` use their temporary SQLite store; the other
    commands need a store and refuse to guess one.
    """
    if db is not None:
        return db
    if db_file is not None:
        return read_db_file(db_file)
    if environ.get(DB_ENV):
        return environ[DB_ENV].strip()
    if required:
        raise ValidationError(
            "--db", f"no store given: use --db URL, --db-file PATH or set {DB_ENV}"
        )
    return None


def open_waiting(
    url: str, who: str, prepare: Callable[[Store], object], *, within: float, **options: Any
) -> Store:
    """The store (and what ``prepare`` opens on it), waited for through a database outage.

    A supervisor restarts a long-running process during an outage as readily as after one:
    with ``--wait-for-db SECONDS`` it waits that long (``within``), saying so once. Anything
    but an outage (a bad password, no such database or store) fails at once, and so does an
    outage without the option: someone at a terminal wants the error, not a wait.
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
