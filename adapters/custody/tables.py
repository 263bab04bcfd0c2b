"""The custody tables of one database: each backend's connections and dialect.

**PostgreSQL**: a gigabyte is a thousand chunk statements each way. A connection per call
would pay a set-up each, and one held per write or stream would let slow producers take
connections, so each statement (or short transaction) borrows one of the process's pool.
Chunks travel in binary, and tables are named with the store's schema, not a
``search_path``. **SQLite**: a connection per call (microseconds), closed after; a
transaction begins ``IMMEDIATE``, taking the one writer's lock up front.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any

import psycopg
from psycopg.rows import tuple_row
from psycopg_pool import ConnectionPool

from actae.adapters.persistence.url import StoreUrl

LOCK_TIMEOUT = 30


class Tables:
    """Statements written once, with ``?`` marks and ``{p}`` before each table's name."""

    prefix = ""
    older_than = "datetime('now', '-' || ? || ' seconds')"
    """The moment ``?`` seconds ago, compared with a row's ``created_at`` (``{older_than}``)."""

    def sql(self, statement: str) -> str:
        """``statement`` with its tables named."""
        return statement.format(p=self.prefix, older_than=self.older_than)

    def run(self, conn: Any, statement: str, *params: Any) -> Any:
        """Execute ``statement`` on ``conn`` with ``params``; the cursor."""
        return conn.execute(self.sql(statement), params)

    def connection(self) -> AbstractContextManager[Any]:
        """A connection in autocommit mode, handed back on exit."""
        raise NotImplementedError

    begin = "BEGIN"
    """The statement that opens a transaction (on SQLite one that takes the write lock)."""

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Any]:
        """A connection inside a transaction: committed on exit, rolled back on error."""
        with self.connection() as conn:
            conn.execute(self.begin)
            try:
                yield conn
            except BaseException:
                with contextlib.suppress(Exception):  # a lost connection must not mask the error
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")


class PostgresTables(Tables):
    """The artifact tables in the URL's schema, through the process's pool."""

    older_than = "now() - make_interval(secs => ?)"

    def __init__(self, url: StoreUrl, pool: ConnectionPool[Any]) -> None:
        self.prefix = f'"{url.postgres_schema}".'
        self.pool = pool

    def run(self, conn: Any, statement: str, *params: Any) -> Any:
        """Execute ``statement`` in psycopg's marks, its answer in binary (never hex text)."""
        text = self.sql(statement).replace("%", "%%").replace("?", "%s")
        return conn.execute(text, params, binary=True)

    @contextlib.contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection answering in tuples, handed back as the pool gave it."""
        self.pool.open()  # the shared pool opens on first use, as eventsourcing's callers do
        with self.pool.connection() as conn:
            given = conn.row_factory
            conn.row_factory = tuple_row
            try:
                yield conn
            finally:
                conn.row_factory = given


class SQLiteTables(Tables):
    """Connections to the store's SQLite file ``database``, in autocommit mode."""

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
