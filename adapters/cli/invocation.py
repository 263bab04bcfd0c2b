"""What one run of the ``actae`` command carries from its entry point to its commands.

The store URL is resolved here, once per command, so an error about the store (it cannot be
reached, it is not there) can name the store that was meant, with its password masked.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import click

from actae.adapters.cli.opening import store_url
from actae.adapters.persistence.url import parse_store_url
from actae.adapters.runtime.worker import CommitHook, Registry


@dataclass
class Invocation:
    """The workflows and hook a program gave ``main``, and the store URL a command chose."""

    registry: Registry | None = None
    on_commit: CommitHook | None = None
    db: str | None = None
    db_given: str | None = None
    """``--db``, as given."""
    db_file: str | None = None
    """``--db-file``, as given."""

    def url(self, *, required: bool = True) -> str | None:
        """The store URL from ``--db``, ``--db-file`` or ``$ACTAE_DB``, checked before any work."""
        self.db = store_url(self.db_given, self.db_file, os.environ, required=required)
        if self.db is not None:
            parse_store_url(self.db)  # a bad URL fails here, before any work starts
        return self.db

    def required_url(self) -> str:
        """Like :meth:`url`, for a command that needs a store (no default)."""
        url = self.url(required=True)
        assert url is not None  # noqa: S101 - store_url raises rather than return None here
        return url


def invocation() -> Invocation:
    """The :class:`Invocation` of the running command (the one ``main`` made)."""
    return click.get_current_context().find_root().ensure_object(Invocation)
