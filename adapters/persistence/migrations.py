"""Versioned store schema: an ordered list of migrations and a table that records them.

Version 1 is the event store itself (created by the eventsourcing recorder). Later releases
append migrations; opening a store applies the missing ones once, under a lock, so many
processes may open the same store at the same time. A store written by a newer Actae is
refused rather than misread.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg
from psycopg import sql

from actae.adapters.persistence.turns import DEFAULT_LOCK_WAIT, create_once, take_turn
from actae.domain.errors import ActaeError

MIGRATIONS_TABLE = "actae_migrations"
LOCK_TIMEOUT = "10s"
"""How long a migration waits for a table's lock before the open fails (to be retried)."""


@dataclass(frozen=True)
class TableMigration:
    """One step of the store's table schema; ``statements`` run after the event tables exist.

    It changes tables; a workflow's ``Migration`` (:mod:`actae.adapters.runtime.store_resume`)
    upgrades a run's state instead.
    """

    version: int
    name: str
    statements: tuple[str, ...] = ()
    sqlite_statements: tuple[str, ...] | None = None
    """SQLite's own spelling of ``statements``, where its types differ (``None``: the same)."""

    @property
    def in_sqlite(self) -> tuple[str, ...]:
        """The statements as SQLite runs them (its own spelling, where it has one)."""
        return self.statements if self.sqlite_statements is None else self.sqlite_statements


CUSTODY_TABLES = (
    # One data key per run, wrapped by a master key of the keyring; NULL once forgotten.
    "CREATE TABLE IF NOT EXISTS {schema}.actae_data_keys (run_id uuid PRIMARY KEY, "
    "master_key text NOT NULL, wrapped bytea, created_at timestamptz NOT NULL DEFAULT now(), "
    "forgotten_at timestamptz)",
    # Artifacts by name (a digest, or a keyed digest when encrypted), their bytes in chunks
    # of a blob, and which runs reference them (purged when none does).
    "CREATE TABLE IF NOT EXISTS {schema}.actae_artifacts (name text PRIMARY KEY, "
    "blob uuid NOT NULL, size bigint NOT NULL, created_at timestamptz NOT NULL DEFAULT now())",
    "CREATE TABLE IF NOT EXISTS {schema}.actae_artifact_chunks (blob uuid NOT NULL, "
    "seq integer NOT NULL, data bytea NOT NULL, PRIMARY KEY (blob, seq))",
    "ALTER TABLE {schema}.actae_artifact_chunks ALTER COLUMN data SET STORAGE EXTERNAL",
    "CREATE TABLE IF NOT EXISTS {schema}.actae_artifact_refs (name text NOT NULL, "
    "run_id uuid NOT NULL, PRIMARY KEY (name, run_id))",
    "CREATE INDEX IF NOT EXISTS actae_artifact_refs_by_run "
    "ON {schema}.actae_artifact_refs (run_id)",
    # Secrets the store keeps for itself (the artifact references' key without a keyring).
    "CREATE TABLE IF NOT EXISTS {schema}.actae_secrets (name text PRIMARY KEY, "
    "value bytea NOT NULL)",
)
"""Tables of the data's custody (keys, artifacts); PostgreSQL's spelling."""

SQLITE_CUSTODY_TABLES = (
    "CREATE TABLE IF NOT EXISTS actae_data_keys (run_id TEXT PRIMARY KEY, "
    "master_key TEXT NOT NULL, wrapped BLOB, created_at TEXT NOT NULL DEFAULT "
    "CURRENT_TIMESTAMP, forgotten_at TEXT)",
    "CREATE TABLE IF NOT EXISTS actae_artifacts (name TEXT PRIMARY KEY, blob TEXT NOT NULL, "
    "size INTEGER NOT NULL, created_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)",
    "CREATE TABLE IF NOT EXISTS actae_artifact_chunks (blob TEXT NOT NULL, "
    "seq INTEGER NOT NULL, data BLOB NOT NULL, PRIMARY KEY (blob, seq))",
    "CREATE TABLE IF NOT EXISTS actae_artifact_refs (name TEXT NOT NULL, "
    "run_id TEXT NOT NULL, PRIMARY KEY (name, run_id))",
    "CREATE INDEX IF NOT EXISTS actae_artifact_refs_by_run ON actae_artifact_refs (run_id)",
    "CREATE TABLE IF NOT EXISTS actae_secrets (name TEXT PRIMARY KEY, value BLOB NOT NULL)",
)

POSITIONS_BY_BLOCK = (
    # The ALTER takes the table's ACCESS EXCLUSIVE lock: behind a long reader it would queue
    # every statement on the table for as long, so it gives up (and the open fails, to be
    # retried) after LOCK_TIMEOUT instead.
    "SET LOCAL lock_timeout = {lock_timeout}",
    # Actae's writers draw a block of positions from the sequence themselves
    # (adapters/persistence/positions.py); without the column's default, a writer that does
    # not (eventsourcing's own recorder, an Actae process from before block positions still
    # running) has its insert refused (NOT NULL) instead of writing positions that readers
    # would not wait for. Such an Actae sees the refusal as a lost race and gives up with a
    # ContentionError after its retries; a new one refuses the store (schema version).
    "ALTER TABLE {schema}.actae_events ALTER COLUMN notification_id DROP DEFAULT",
)
"""PostgreSQL only: SQLite's single writer keeps its positions as they were (the version is
still recorded there: one schema version per store, whatever the backend)."""

MIGRATIONS = (
    TableMigration(1, "event store tables (eventsourcing recorder)"),
    TableMigration(2, "data keys and artifacts", CUSTODY_TABLES, SQLITE_CUSTODY_TABLES),
    TableMigration(3, "positions drawn in blocks by Actae's writers", POSITIONS_BY_BLOCK, ()),
    # Made by the recorders' create_table (adapters/persistence/operation_ids.py): the
    # column, the ids of the records written before it, then the unique index.
    TableMigration(4, "operation ids in the events' rows, unique"),
)
LATEST = MIGRATIONS[-1].version

S = TypeVar("S")
ServiceFactory = Callable[[bool], S]
"""Builds the store's service; the flag says whether it may create tables."""


class SchemaVersionError(ActaeError):
    """The store was migrated by a newer Actae than this one."""

    code = "schema_version"


def _refuse_newer(current: int) -> None:
    if current > LATEST:
        msg = (
            f"this store is at schema version {current} but this Actae knows only up to "
            f"{LATEST}; upgrade the actae package"
        )
        raise SchemaVersionError(msg)


def open_postgres(
    conninfo: dict[str, str],
    schema: str,
    build: ServiceFactory[S],
    *,
    create: bool = True,
    lock_wait: float = DEFAULT_LOCK_WAIT,
) -> S | None:
    """Build the service, creating or upgrading the schema first, in turns with other openers.

    A store already at this Actae's version opens without DDL or lock (also on a server
    that is read-only). Otherwise the schema changes are made in a turn on the migrations
    table (:mod:`actae.adapters.persistence.turns`), waited for at most ``lock_wait``
    seconds (then :class:`~actae.domain.errors.StoreBusyError`). With ``create=False`` a
    schema that holds no store is left alone (no DDL runs) and the answer is ``None``, for
    the caller to report with the URL it knows.
    """
    table = sql.Identifier(schema, MIGRATIONS_TABLE)
    with psycopg.connect(**conninfo, autocommit=True) as conn:  # type: ignore[arg-type]
        current = _postgres_version(conn, table)
        if current == 0 and not create and not _exists(conn, table):
            return None
        _refuse_newer(current)
        if current == LATEST:
            return build(False)
        if create:
            create_once(
                conn, sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema))
            )
            create_once(conn, migrations_table(table))
        with conn.transaction():
            take_turn(conn, table, lock_wait)
            return _migrate(conn, schema, build, create=create)


def migrations_table(table: sql.Identifier) -> sql.Composed:
    """The statement that creates the migrations table (if it is not there)."""
    return sql.SQL(
        "CREATE TABLE IF NOT EXISTS {} (version integer PRIMARY KEY, "
        "name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
    ).format(table)


def _migrate(
    conn: psycopg.Connection[Any], schema: str, build: ServiceFactory[S], *, create: bool
) -> S | None:
    """Apply the missing migrations in this turn, each in a savepoint.

    The version is read again: a turn before this one may have applied them.
    """
    ident = sql.Identifier(schema)
    table = sql.Identifier(schema, MIGRATIONS_TABLE)
    current = _postgres_version(conn, table)
    if current == 0 and not create:
        return None
    _refuse_newer(current)
    service = build(current < LATEST)
    for migration in MIGRATIONS:
        if migration.version <= current:
            continue
        with conn.transaction():
            for statement in migration.statements:
                conn.execute(
                    sql.SQL(statement).format(schema=ident, lock_timeout=sql.Literal(LOCK_TIMEOUT))
                )
            conn.execute(
                sql.SQL("INSERT INTO {} (version, name) VALUES (%s, %s)").format(table),
                (migration.version, migration.name),
            )
    return service


def _exists(conn: psycopg.Connection[Any], table: sql.Identifier) -> bool:
    row = conn.execute("SELECT to_regclass(%s)", (table.as_string(conn),)).fetchone()
    return row is not None and row[0] is not None


def _postgres_version(conn: psycopg.Connection[Any], table: sql.Identifier) -> int:
    """The store's schema version; 0 when the migrations table is absent or empty."""
    if not _exists(conn, table):
        return 0
    row = conn.execute(sql.SQL("SELECT coalesce(max(version), 0) FROM {}").format(table))
    return int(row.fetchone()[0])  # type: ignore[index]


def open_sqlite(database: str, build: ServiceFactory[S], *, create: bool = True) -> S | None:
    """Check the schema version, build the service (SQLite DDL is idempotent), record it.

    ``database`` is a path or a URI (an in-memory database's). With ``create=False`` a
    database that holds no store is left as it is and the answer is ``None`` (that a file
    exists is the backend's to check first: connecting would create it).
    """
    conn = sqlite3.connect(database, uri=True, timeout=30, isolation_level=None)
    try:
        if create:
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} (version INTEGER PRIMARY KEY, "
                "name TEXT NOT NULL, applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)"
            )
        current = _sqlite_version(conn)
        if current == 0 and not create:
            return None
        _refuse_newer(current)
        service = build(True)
        conn.execute("BEGIN IMMEDIATE")
        for migration in MIGRATIONS:
            if migration.version <= current:
                continue
            for statement in migration.in_sqlite:
                conn.execute(statement)
            conn.execute(
                f"INSERT OR IGNORE INTO {MIGRATIONS_TABLE} (version, name) VALUES (?, ?)",  # noqa: S608
                (migration.version, migration.name),
            )
        conn.execute("COMMIT")
    finally:
        conn.close()
    return service


def _sqlite_version(conn: sqlite3.Connection) -> int:
    """The store's schema version; 0 when the migrations table is absent or empty."""
    found = conn.execute(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?",
        (MIGRATIONS_TABLE,),
    ).fetchone()
    if found == (0,):
        return 0
    row = conn.execute(f"SELECT coalesce(max(version), 0) FROM {MIGRATIONS_TABLE}")  # noqa: S608 - constant name
    return int(row.fetchone()[0])
