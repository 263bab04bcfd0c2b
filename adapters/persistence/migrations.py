"""Versioned store schema: one ordered list of migrations per backend, and a table of them.

A migration's version is its place in its list, from 1: the baseline
(:mod:`actae.adapters.persistence.baseline`), every table Actae owns. Later releases append.
Opening a store applies the missing ones in a turn (:mod:`actae.adapters.persistence.turns`),
so many processes may open one store at once; a store of a newer Actae is refused.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg
from psycopg import sql

from actae.adapters.persistence.baseline import POSTGRES_BASELINE, SQLITE_BASELINE, in_sqlite
from actae.adapters.persistence.turns import DEFAULT_LOCK_WAIT, create_once, take_turn
from actae.domain.errors import ActaeError

MIGRATIONS_TABLE = "actae_migrations"
MIGRATIONS_DDL = (
    "CREATE TABLE IF NOT EXISTS {} (version integer PRIMARY KEY, name text NOT NULL, "
    "applied_at timestamptz NOT NULL DEFAULT now())"
)
LOCK_TIMEOUT = "10s"
"""How long a migration waits for a table's lock: a waiting DDL queues every other statement."""


@dataclass(frozen=True)
class Migration:
    """One step of a backend's schema: ``statements`` run in order, in one transaction."""

    name: str
    statements: tuple[str, ...]


POSTGRES_MIGRATIONS = (Migration("baseline: events, custody, read models", POSTGRES_BASELINE),)
"""PostgreSQL's steps; statements name the store's schema as ``{schema}``."""
SQLITE_MIGRATIONS = (Migration("baseline: events, custody, read models", SQLITE_BASELINE),)

S = TypeVar("S")
ServiceFactory = Callable[[bool], S]
"""Builds the store's service; the flag says whether its recorder should make its tables."""


class SchemaVersionError(ActaeError):
    """The store was migrated by a newer Actae than this one."""

    code = "schema_version"


def missing(current: int, migrations: tuple[Migration, ...]) -> list[tuple[int, Migration]]:
    """The migrations a store at version ``current`` lacks, with their versions."""
    if current > len(migrations):
        msg = (
            f"this store is at schema version {current} but this Actae knows only up to "
            f"{len(migrations)}; upgrade the actae package"
        )
        raise SchemaVersionError(msg)
    return list(enumerate(migrations, start=1))[current:]


# -- PostgreSQL -----------------------------------------------------------------------------


def open_postgres(
    conninfo: dict[str, str],
    schema: str,
    build: ServiceFactory[S],
    *,
    create: bool = True,
    lock_wait: float = DEFAULT_LOCK_WAIT,
) -> S | None:
    """Build the service once the schema is created or upgraded, in turns with other openers.

    A store at this version opens without DDL or lock (a read-only server too); the turn is
    waited for at most ``lock_wait`` seconds. ``create=False``: no store there gives ``None``.
    """
    table = sql.Identifier(schema, MIGRATIONS_TABLE)
    with psycopg.connect(**conninfo, autocommit=True) as conn:  # type: ignore[arg-type]
        current = _postgres_version(conn, table)
        if current == 0 and not create:  # nothing migrated, even if an opener made the table
            return None
        if missing(current, POSTGRES_MIGRATIONS):
            migrate_postgres(conn, schema, lock_wait)
    return build(False)


def migrate_postgres(conn: psycopg.Connection[Any], schema: str, lock_wait: float) -> None:
    """Apply the missing migrations to ``schema`` in a turn (``conn`` autocommits).

    The version is read again in the turn (an earlier one may have migrated); each in a savepoint.
    """
    ident = sql.Identifier(schema)
    table = sql.Identifier(schema, MIGRATIONS_TABLE)
    create_once(conn, sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(ident))
    create_once(conn, migrations_table(table))
    with conn.transaction():
        take_turn(conn, table, lock_wait)
        lacking = missing(_postgres_version(conn, table), POSTGRES_MIGRATIONS)
        conn.execute(sql.SQL("SET LOCAL lock_timeout = {}").format(sql.Literal(LOCK_TIMEOUT)))
        for version, migration in lacking:
            with conn.transaction():
                for statement in migration.statements:
                    conn.execute(sql.SQL(statement).format(schema=ident))
                conn.execute(
                    sql.SQL("INSERT INTO {} (version, name) VALUES (%s, %s)").format(table),
                    (version, migration.name),
                )


def migrations_table(table: sql.Identifier) -> sql.Composed:
    """The statement that creates the migrations table (if it is not there)."""
    return sql.SQL(MIGRATIONS_DDL).format(table)


def _exists(conn: psycopg.Connection[Any], table: sql.Identifier) -> bool:
    row = conn.execute("SELECT to_regclass(%s)", (table.as_string(conn),)).fetchone()
    return row is not None and row[0] is not None


def _postgres_version(conn: psycopg.Connection[Any], table: sql.Identifier) -> int:
    """The store's schema version; 0 when the migrations table is absent or empty."""
    if not _exists(conn, table):
        return 0
    row = conn.execute(sql.SQL("SELECT coalesce(max(version), 0) FROM {}").format(table))
    return int(row.fetchone()[0])  # type: ignore[index]


# -- SQLite ---------------------------------------------------------------------------------


def open_sqlite(database: str, build: ServiceFactory[S], *, create: bool = True) -> S | None:
    """Apply the missing migrations, then build the service (``None``: no store, no create)."""
    conn = sqlite3.connect(database, uri=True, timeout=30, isolation_level=None)
    try:
        current = sqlite_version(conn)
        if current == 0 and not create:
            return None
        if missing(current, SQLITE_MIGRATIONS):
            conn.execute("BEGIN IMMEDIATE")  # the file's write lock: openers take turns
            migrate_sqlite(conn)
            conn.execute("COMMIT")
    finally:
        conn.close()
    return build(False)


def migrate_sqlite(conn: Any) -> None:
    """Apply the missing migrations in the caller's transaction (a connection or cursor)."""
    conn.execute(in_sqlite(MIGRATIONS_DDL.format(MIGRATIONS_TABLE)))
    for version, migration in missing(sqlite_version(conn), SQLITE_MIGRATIONS):
        for statement in migration.statements:
            conn.execute(statement)
        conn.execute(
            f"INSERT INTO {MIGRATIONS_TABLE} (version, name) VALUES (?, ?)",  # noqa: S608
            (version, migration.name),
        )


def sqlite_version(conn: Any) -> int:
    """The store's schema version; 0 when the migrations table is absent or empty."""
    found = conn.execute(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?", (MIGRATIONS_TABLE,)
    ).fetchone()
    if tuple(found) == (0,):
        return 0
    row = conn.execute(f"SELECT coalesce(max(version), 0) FROM {MIGRATIONS_TABLE}")  # noqa: S608 - constant name
    return int(row.fetchone()[0])
