"""Analysts' SQL (``projector.query``): one statement that only reads, keeping nothing.

Each guard is the database's own, not a parse of the SQL here: one statement (PostgreSQL's
extended protocol parses exactly one; sqlite3 refuses a second before running the first),
reads only (a ``BEGIN READ ONLY`` transaction that is always rolled back; SQLite's
``query_only`` and an authorizer that allows only reading, checked when the statement is
prepared), nothing kept (a connection of the call's own, never a pooled one, closed after).
A function the store's role may call still runs: people get a role of their own
(``actae grant-analyst``; docs/data.md).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from typing import Any

import psycopg

from actae.domain.errors import ValidationError

ONE_READ = "expected exactly one SQL statement that only reads (SELECT, or WITH ... SELECT)"
READS = frozenset(
    {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
)
"""The SQLite authorizer's actions that only read; every other one is denied."""

Rows = list[dict[str, Any]]


def rows_of(cursor: Any) -> Rows:
    """A cursor's rows as dicts (none for a statement that returns no rows)."""
    if cursor.description is None:
        return []
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _refused(found: str) -> ValidationError:
    return ValidationError("statement", f"{ONE_READ}; {found}. Nothing was run or changed")


ANALYST_SESSIONS = 2
"""Analysts' statements a process runs at once on PostgreSQL (a burst never takes the writers')."""


class PostgresQueries:
    """Analysts' statements on PostgreSQL, each on a connection of its own, a few at once."""

    def __init__(self, conninfo: dict[str, str], schema: str) -> None:
        options = f"{conninfo.get('options', '')} -c search_path={schema}".strip()
        self._conninfo = {**conninfo, "options": options}
        self._turns = threading.BoundedSemaphore(ANALYST_SESSIONS)

    def run(self, statement: str, params: Any) -> Rows:
        """``statement``'s rows, read in a read-only transaction that ends with the session."""
        with self._turns:
            return self._run(statement, params)

    def _run(self, statement: str, params: Any) -> Rows:
        conn = psycopg.connect(
            **self._conninfo,  # type: ignore[arg-type]
            autocommit=True,
            prepare_threshold=None,  # psycopg prepares nothing either
        )
        try:
            conn.execute("BEGIN READ ONLY")
            with conn.pipeline():  # the extended protocol: one statement only
                cursor = conn.execute(statement, params)
            return rows_of(cursor)
        except psycopg.errors.ReadOnlySqlTransaction as error:
            raise _refused(f"PostgreSQL refused a write: {error}") from error
        except psycopg.errors.SyntaxError as error:
            raise _refused(f"PostgreSQL refused it: {error}") from error
        finally:
            conn.close()  # the session ends: nothing the statement did to it outlives the call


class SqliteQueries:
    """Analysts' statements on SQLite: read-only, under an authorizer that allows only reads."""

    def __init__(
        self, connect: Callable[[], sqlite3.Connection], done: Callable[[sqlite3.Connection], None]
    ) -> None:
        self._connect = connect
        self._done = done

    def run(self, statement: str, params: Any) -> Rows:
        """``statement``'s rows; one that would do anything but read is refused unprepared."""
        denied: list[int] = []

        def only_reads(action: int, *_: Any) -> int:
            if action in READS:
                return sqlite3.SQLITE_OK
            denied.append(action)
            return sqlite3.SQLITE_DENY

        conn = self._connect()
        try:
            conn.execute("PRAGMA query_only = ON")
            conn.set_authorizer(only_reads)
            return rows_of(conn.execute(statement, params or ()))
        except sqlite3.ProgrammingError as error:  # more than one statement, or bad bindings
            raise _refused(f"SQLite refused it: {error}") from error
        except sqlite3.DatabaseError as error:
            if denied or getattr(error, "sqlite_errorcode", None) == sqlite3.SQLITE_READONLY:
                raise _refused("SQLite refused something other than reading") from error
            raise
        finally:
            conn.set_authorizer(None)
            conn.execute("PRAGMA query_only = OFF")
            self._done(conn)


def read_only_sqlite(uri: str) -> SqliteQueries:
    """Analysts' statements on a SQLite database (``uri`` opens it read-only)."""

    def connect() -> sqlite3.Connection:
        return sqlite3.connect(uri, uri=True, timeout=30, isolation_level=None)

    return SqliteQueries(connect, lambda conn: conn.close())
