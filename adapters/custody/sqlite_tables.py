"""Artifacts in the store's SQLite database: a connection per call, closed after.

Opening a SQLite connection costs microseconds, and no connection is then shared between
threads. Transactions begin ``IMMEDIATE``: SQLite has one writer at a time, taken up front.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator

from actae.adapters.custody.blobs import Tables

LOCK_TIMEOUT = 30


class SQLiteTables(Tables):
    """Connections to the store's SQLite database, in autocommit mode (transactions explicit).

    ``database`` is a path, or the URI of an in-memory database that every connection of
    this process shares by name.
    """

    begin = "BEGIN IMMEDIATE"

    def __init__(self, database: str) -> None:
        self.database = database

    @contextlib.contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        """A fresh connection, closed on exit."""
        conn = sqlite3.connect(self.database, uri=True, timeout=LOCK_TIMEOUT, isolation_level=None)
        try:
            yield conn
        finally:
            conn.close()
