"""Read-model DDL: create the tables, upgrade the ones an older Actae made, swap in a rebuild.

``CREATE TABLE IF NOT EXISTS`` leaves an existing table as it is, so a read model made by an
older Actae would lack newer columns (and keep the run leases' ``run_id`` as text, which
PostgreSQL refuses to join with ``run_status.run_id``). Opening the read models therefore
adds missing columns (filled from what the old columns meant where that is known; otherwise
empty until ``actae project --rebuild``) and converts the leases' ``run_id`` to uuid.

:class:`SchemaMethods` holds the DDL both backends share; :class:`PostgresSchema` and
:class:`SqliteSchema` hold what differs (column types, how creators take turns, how a table's
columns are read, what becomes of a rebuilt table's indexes), so no method asks which
backend it runs on. The read models of each backend
(:mod:`actae.adapters.readside.readmodels`) inherit their backend's class.
"""

# ruff: noqa: S608 - SQL assembled from our own constant table and column names, never input

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, ClassVar

from actae.projections.tables import OUTSTANDING_VIEW, SETTLED, TABLES, Table

TRACKING = "actae_projection_tracking"
ERRORS = "actae_projection_errors"
LEASES = "actae_run_leases"
WORKERS = "actae_worker_agents"
BACKFILL = {("effects", "claimed_in_doubt"): "in_doubt"}
"""New columns whose value an older column held (before in_doubt also meant 'lease ran out')."""


class SchemaMethods(ABC):
    """``ReadModelDB`` methods that create, upgrade and swap the read-model tables."""

    types: ClassVar[dict[str, str]]
    """Each column type of :mod:`actae.projections.tables` as this backend declares it."""
    create_view: ClassVar[str]
    """The statement's start that (re)creates the outstanding-effects view."""

    if TYPE_CHECKING:  # provided by ReadModelDB

        def transaction(self) -> AbstractContextManager[None]:
            """A transaction, or a savepoint inside one."""
            ...

        def execute(self, statement: str, params: Sequence[Any] = ()) -> Any:
            """Run one statement (written with the backend's parameter ``mark``)."""
            ...

    def ensure_schema(self, suffix: str = "") -> None:
        """Create the tables (and the outstanding-effects view), upgrading older ones."""
        with self.transaction():
            self._take_turns()
            for table in TABLES:
                self.execute(self._create_table(table, suffix))
                for statement in self._create_indexes(table, suffix):
                    self.execute(statement)
            if not suffix:
                self._create_bookkeeping()
                self._upgrade()
                self.execute(self._create_view())

    @abstractmethod
    def _take_turns(self) -> None:
        """Keep processes that create the tables at once apart (inside the transaction)."""

    def _create_bookkeeping(self) -> None:
        """The tracking, poison-event and worker-coordination tables (one set, never rebuilt)."""
        types = self.types
        self.execute(
            f"CREATE TABLE IF NOT EXISTS {TRACKING} (name TEXT PRIMARY KEY, "
            f"position {types['int']} NOT NULL)"
        )
        self.execute(
            f"CREATE TABLE IF NOT EXISTS {ERRORS} (name TEXT NOT NULL, "
            f"position {types['int']} NOT NULL, topic TEXT, "
            f"originator_id TEXT, error TEXT NOT NULL, recorded_at {types['timestamp']} "
            "NOT NULL, PRIMARY KEY (name, position))"
        )
        self.execute(  # run_id typed as in run_status, so the two tables join
            f"CREATE TABLE IF NOT EXISTS {LEASES} (run_id {types['uuid']} PRIMARY KEY, "
            f"worker TEXT NOT NULL, token {types['int']} NOT NULL, "
            f"expires_at {types['timestamp']} NOT NULL)"
        )
        self.execute(  # which agents each live worker runs (adapters/readside/worker_tables.py)
            f"CREATE TABLE IF NOT EXISTS {WORKERS} (worker TEXT NOT NULL, agent_id TEXT NOT NULL, "
            f"seen_until {types['timestamp']} NOT NULL, PRIMARY KEY (worker, agent_id))"
        )

    def _upgrade(self) -> None:
        """Bring tables an older Actae created up to the current columns and types."""
        for table in TABLES:
            present = self._columns(table.name)
            for column in table.columns:
                if column.name in present:
                    continue
                kind = self.types[column.type]
                self.execute(f"ALTER TABLE {table.name} ADD COLUMN {column.name} {kind}")
                source = BACKFILL.get((table.name, column.name))
                if source is not None and source in present:
                    self.execute(f"UPDATE {table.name} SET {column.name} = {source}")
        self._upgrade_leases()

    @abstractmethod
    def _upgrade_leases(self) -> None:
        """Give the run leases' ``run_id`` the type of ``run_status.run_id``, so they join."""

    @abstractmethod
    def _columns(self, table: str) -> dict[str, str]:
        """The columns ``table`` has now, with their declared types."""

    def _create_table(self, table: Table, suffix: str) -> str:
        columns = ", ".join(
            f"{c.name} {self.types[c.type]}" + (" NOT NULL" if c.name == table.key else "")
            for c in table.columns
        )
        return (
            f"CREATE TABLE IF NOT EXISTS {table.name}{suffix} ({columns}, "
            f"PRIMARY KEY ({table.key}))"
        )

    @staticmethod
    def _create_indexes(table: Table, suffix: str) -> Iterator[str]:
        for column in table.indexes:
            yield (
                f"CREATE INDEX IF NOT EXISTS {table.name}{suffix}_{column} "
                f"ON {table.name}{suffix} ({column})"
            )

    def _create_view(self) -> str:
        settled = ", ".join(f"'{s}'" for s in SETTLED)
        return (
            f"{self.create_view} {OUTSTANDING_VIEW} AS SELECT * FROM effects "
            f"WHERE status NOT IN ({settled})"
        )

    def swap_in(self, suffix: str) -> None:
        """Replace the live tables by the ``suffix`` ones (call inside a transaction)."""
        self.execute(f"DROP VIEW IF EXISTS {OUTSTANDING_VIEW}")
        for table in TABLES:
            self.execute(f"DROP TABLE {table.name}")
            self.execute(f"ALTER TABLE {table.name}{suffix} RENAME TO {table.name}")
            self._move_indexes(table, suffix)
        self.execute(self._create_view())

    @abstractmethod
    def _move_indexes(self, table: Table, suffix: str) -> None:
        """Give the renamed ``table`` the indexes named after it (those of ``suffix`` go)."""

    def drop(self, suffix: str) -> None:
        """Drop leftover ``suffix`` tables (an interrupted rebuild)."""
        with self.transaction():
            for table in TABLES:
                self.execute(f"DROP TABLE IF EXISTS {table.name}{suffix}")


class PostgresSchema(SchemaMethods):
    """The read-model DDL in PostgreSQL's types, with its advisory lock and index renames."""

    types: ClassVar[dict[str, str]] = {
        "uuid": "uuid",
        "text": "text",
        "int": "bigint",
        "bool": "boolean",
        "timestamp": "timestamptz",
        "json": "jsonb",
    }
    create_view = "CREATE OR REPLACE VIEW"

    def _take_turns(self) -> None:
        """A transaction-scoped advisory lock per schema makes creators take turns.

        Processes that start at once (a worker and the projector) would otherwise race:
        ``CREATE TABLE IF NOT EXISTS`` is not safe against a concurrent creator (it fails on
        the table's row type).
        """
        self.execute(
            "SELECT pg_advisory_xact_lock(hashtext('actae-readmodels:' || current_schema()))"
        )

    def _upgrade_leases(self) -> None:
        """An older Actae kept the leases' ``run_id`` as text, which PostgreSQL will not join."""
        if self._columns(LEASES)["run_id"] != "uuid":
            self.execute(f"ALTER TABLE {LEASES} ALTER COLUMN run_id TYPE uuid USING run_id::uuid")

    def _columns(self, table: str) -> dict[str, str]:
        rows = self.execute(
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = %s",
            (table,),
        ).fetchall()
        return {str(name): str(kind) for name, kind in rows}

    def _move_indexes(self, table: Table, suffix: str) -> None:
        """Rename them: indexes are named after the table they were created for."""
        self.execute(f"ALTER INDEX {table.name}{suffix}_pkey RENAME TO {table.name}_pkey")
        for column in table.indexes:
            self.execute(
                f"ALTER INDEX {table.name}{suffix}_{column} RENAME TO {table.name}_{column}"
            )


class SqliteSchema(SchemaMethods):
    """The read-model DDL in SQLite's types; SQLite cannot rename an index, so it rebuilds."""

    types: ClassVar[dict[str, str]] = {
        "uuid": "TEXT",
        "text": "TEXT",
        "int": "INTEGER",
        "bool": "INTEGER",
        "timestamp": "TEXT",
        "json": "TEXT",
    }
    create_view = "CREATE VIEW IF NOT EXISTS"

    def _take_turns(self) -> None:
        """Nothing to do: the transaction's ``BEGIN IMMEDIATE`` already makes creators wait."""

    def _upgrade_leases(self) -> None:
        """Nothing to do: every id is text on SQLite, so the leases join ``run_status`` as is."""

    def _columns(self, table: str) -> dict[str, str]:
        rows = self.execute(f"PRAGMA table_info({table})").fetchall()
        return {str(row[1]): str(row[2]) for row in rows}

    def _move_indexes(self, table: Table, suffix: str) -> None:
        """Drop the rebuild's indexes and create the live ones (SQLite cannot rename one)."""
        for column in table.indexes:
            self.execute(f"DROP INDEX {table.name}{suffix}_{column}")
        for statement in self._create_indexes(table, ""):
            self.execute(statement)
