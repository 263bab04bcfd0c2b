"""Which store a command uses (``--db URL``, ``--db-file PATH`` or ``$ACTAE_DB``), and opening it.

A URL can hold a password, and a command line shows in ``ps`` and shell history; a file or
the environment does not. Exactly one source wins, by a fixed precedence. The library never
reads the environment: only the command does, here, once per command, so an error about the
store can name the store that was meant.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from actae.adapters.persistence.outages import Outage, ride_out
from actae.adapters.persistence.url import parse_store_url
from actae.adapters.runtime.store import Store
from actae.adapters.runtime.store import open as open_store
from actae.adapters.runtime.worker import CommitHook, Registry
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

    ``None`` (when not ``required``) lets ``demo`` and ``drill`` use a temporary SQLite store.
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


@dataclass
class Invocation:
    """The workflows and hook a program gave ``main``, and the store a command chose."""

    registry: Registry | None = None
    on_commit: CommitHook | None = None
    db: str | None = None
    db_given: str | None = None  # --db
    db_file: str | None = None  # --db-file

    def url(self, *, required: bool = True) -> str | None:
        """The store URL, checked before any work starts."""
        self.db = store_url(self.db_given, self.db_file, os.environ, required=required)
        if self.db is not None:
            parse_store_url(self.db)
        return self.db

    def required_url(self) -> str:
        """Like :meth:`url`, for a command that needs a store."""
        url = self.url(required=True)
        assert url is not None  # noqa: S101 - store_url raises rather than return None here
        return url


def invocation() -> Invocation:
    """The :class:`Invocation` of the running command (the one ``main`` made)."""
    return click.get_current_context().find_root().ensure_object(Invocation)


def open_waiting(
    url: str, who: str, prepare: Callable[[Store], object], *, within: float, **options: Any
) -> Store:
    """The store (and what ``prepare`` opens on it), waited for through an outage.

    A supervisor restarts a process during an outage as readily as after one, so it may wait
    ``within`` seconds (``--wait-for-db``); anything but an outage fails at once, and so does
    an outage without the option: someone at a terminal wants the error, not a wait.
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
