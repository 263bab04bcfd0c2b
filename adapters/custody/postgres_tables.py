"""Artifacts in the store's PostgreSQL schema, through the process's pool.

A gigabyte is a thousand chunk statements each way. A connection per call would pay a
connection set-up (and a TLS handshake) for each; one held per write or per open stream
would let slow producers and forgotten readers take as many server connections as they
like. So each statement (or short transaction) checks a connection out of the pool the event
store uses and gives it back. Chunks travel in binary, and every statement names its tables
with the store's schema rather than a ``search_path``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import psycopg
from psycopg.rows import tuple_row
from psycopg_pool import ConnectionPool

from actae.adapters.custody.blobs import Tables
from actae.adapters.persistence.url import StoreUrl


class PostgresTables(Tables):
    """The pool and the schema of the artifact tables (given no pool, one of their own)."""

    older_than = "now() - make_interval(secs => ?)"

    def __init__(self, url: StoreUrl, pool: ConnectionPool[Any] | None = None) -> None:
        self.prefix = f'"{url.postgres_schema}".'
        self._owns_pool = pool is None
        self.pool: ConnectionPool[Any] = pool or ConnectionPool(
            kwargs={**url.postgres_conninfo, "autocommit": True},
            min_size=0,
            max_size=max(1, url.pool_size),
            timeout=url.pool_timeout,
            name="actae-artifacts",
            num_workers=1,
            open=True,
        )

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

    def close(self) -> None:
        """Close the pool if it is the tables' own (again: nothing happens)."""
        if self._owns_pool:
            self.pool.close()
