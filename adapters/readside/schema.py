"""Read-model DDL of a rebuild: fresh tables made from the definitions, then swapped in.

The live read models are made by the store's migrations (version 1,
:mod:`actae.adapters.persistence.baseline`), like every other table. A rebuild projects
into fresh tables made here from :mod:`actae.projections.tables`, and swaps them in.
Opening the read models describes every table, view and column (PostgreSQL comments, from
:mod:`actae.projections.tables`), writing only the descriptions that differ.

:class:`SchemaMethods` holds the DDL both backends share; :class:`PostgresSchema` and
:class:`SqliteSchema` hold what differs (column types, a timestamp's UTC day, how creators
take turns, comments, what becomes of a rebuilt table's indexes), so no method asks which
backend it runs on. The read models of each backend
(:mod:`actae.adapters.readside.readmodels`) inherit their backend's class.
"""

# ruff: noqa: S608 - SQL assembled from our own constant table and column names, never input

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, ClassVar

import psycopg
from psycopg import sql

from actae.adapters.persistence.turns import DEFAULT_LOCK_WAIT, take_turn
from actae.projections.tables import (
    COST_PER_DAY,
    OUTSTANDING_VIEW,
    RUN_STATUS,
    SETTLED,
    TABLES,
    USAGE,
    USAGE_NAMES,
    VIEWS,
    Table,
)

TRACKING = "actae_projection_tracking"
ERRORS = "actae_projection_errors"
LEASES = "actae_run_leases"
WORKERS = "actae_worker_agents"
REGRESSIONS = "actae_regressions"


def index_name(table: str, columns: tuple[str, ...]) -> str:
    """An index's name: its table's, then its columns'."""
    return f"{table}_{'_'.join(columns)}"


BOOKKEEPING = {
    TRACKING: "The projector's position per name: the last global position (notification id) "
    "applied to the read models (read_models; read_models__rebuild while a rebuild runs).",
    ERRORS: "Poison events: each event the projector could not apply and skipped, with the "
    "error (name, position, topic, originator_id, error, recorded_at).",
    LEASES: "Which worker drives each run: run_id, worker, a fencing token raised at every "
    "take-over, expires_at on the store's clock.",
    WORKERS: "Which agents each live worker runs workflows for, seen_until renewed while it lives.",
    REGRESSIONS: "Channels whose stored history went back behind what a process saw "
    "(HistoryRegressedError): channel_id, detail, found_at; run_status says "
    "'history regressed: ...' for their runs until the row is deleted (docs/outages.md).",
}
"""What the tables beside the read models hold (described in psql like the read models)."""


def descriptions() -> Iterator[tuple[str, str, str | None, str]]:
    """What to describe: (TABLE or VIEW, its name, a column or None for itself, the text)."""
    for kind, relations in (("TABLE", TABLES), ("VIEW", VIEWS)):
        for relation in relations:
            yield kind, relation.name, None, relation.doc
            for column in relation.columns:
                yield kind, relation.name, column.name, column.doc
    for table, doc in BOOKKEEPING.items():
        yield "TABLE", table, None, doc


class SchemaMethods(ABC):
    """``ReadModelDB`` methods that create, upgrade and swap the read-model tables."""

    types: ClassVar[dict[str, str]]
    """Each column type of :mod:`actae.projections.tables` as this backend declares it."""
    create_view: ClassVar[str]
    """The statement's start that (re)creates a view."""
    utc_day: ClassVar[str]
    """The UTC date of a timestamp column, as SQL (``{}`` is the column)."""

    if TYPE_CHECKING:  # provided by ReadModelDB

        def transaction(self) -> AbstractContextManager[None]:
            """A transaction, or a savepoint inside one."""
            ...

        def execute(self, statement: str, params: Sequence[Any] = ()) -> Any:
            """Run one statement (written with the backend's parameter ``mark``)."""
            ...

    def ensure_schema(self, suffix: str = "") -> None:
        """Describe the live tables; with a ``suffix``, create a rebuild's fresh tables."""
        with self.transaction():
            self.take_turns()
            if not suffix:
                self._describe()
                return
            for table in TABLES:
                self.execute(self._create_table(table, suffix))
                for statement in self._create_indexes(table, suffix):
                    self.execute(statement)

    @abstractmethod
    def take_turns(self) -> None:
        """Keep processes that create the tables at once apart (inside the transaction)."""

    def _create_table(self, table: Table, suffix: str) -> str:
        columns = ", ".join(
            f"{c.name} {self.types[c.type]}" + (" NOT NULL" if c.name in table.keys else "")
            for c in table.columns
        )
        return (
            f"CREATE TABLE IF NOT EXISTS {table.name}{suffix} ({columns}, "
            f"PRIMARY KEY ({', '.join(table.keys)}))"
        )

    @staticmethod
    def _create_indexes(table: Table, suffix: str) -> Iterator[str]:
        for columns in table.indexes:
            yield (
                f"CREATE INDEX IF NOT EXISTS {index_name(table.name + suffix, columns)} "
                f"ON {table.name}{suffix} ({', '.join(columns)})"
            )

    def _create_views(self) -> None:
        settled = ", ".join(f"'{s}'" for s in SETTLED)
        self.execute(
            f"{self.create_view} {OUTSTANDING_VIEW} AS SELECT * FROM effects "
            f"WHERE status NOT IN ({settled})"
        )
        self.execute(f"{self.create_view} {COST_PER_DAY.name} AS {self._cost_per_day()}")

    def _cost_per_day(self) -> str:
        """What each usage row added to its channel's totals, summed per day and run kind.

        Each row holds the run's totals after its event, so what the event added is the
        difference from the channel's previous row (a channel's first row: all of it; a
        fork's channel starts at zero). The window partitions by the run's workflow, agent
        and model as well as the channel (the same partitions: a channel is one run's), so
        that a filter on those columns reaches run_status before any difference is taken.
        """
        added = ", ".join(f"u.{n} - coalesce(lag(u.{n}) OVER w, 0) AS {n}" for n in USAGE_NAMES)
        sums = ", ".join(f"sum({n}) AS {n}" for n in USAGE_NAMES)
        return (
            f"SELECT day, workflow_id, agent_id, model, count(DISTINCT run_id) AS runs, {sums} "
            f"FROM (SELECT {self.utc_day.format('u.at')} AS day, r.workflow_id, r.agent_id, "
            f"r.model, u.run_id, {added} "
            f"FROM {USAGE.name} u LEFT JOIN {RUN_STATUS.name} r ON r.run_id = u.run_id "
            "WINDOW w AS (PARTITION BY r.workflow_id, r.agent_id, r.model, u.channel_id "
            "ORDER BY u.cursor)) AS added "
            "GROUP BY day, workflow_id, agent_id, model"
        )

    @abstractmethod
    def _describe(self) -> None:
        """Attach the descriptions of :mod:`actae.projections.tables` to tables and views."""

    def swap_in(self, suffix: str) -> None:
        """Replace the live tables by the ``suffix`` ones (call inside a transaction)."""
        for view in VIEWS:
            self.execute(f"DROP VIEW IF EXISTS {view.name}")
        for table in TABLES:
            self.execute(f"DROP TABLE {table.name}")
            self.execute(f"ALTER TABLE {table.name}{suffix} RENAME TO {table.name}")
            self._move_indexes(table, suffix)
        self._create_views()
        self._describe()

    @abstractmethod
    def _move_indexes(self, table: Table, suffix: str) -> None:
        """Give the renamed ``table`` the indexes named after it (those of ``suffix`` go)."""

    def drop(self, suffix: str) -> None:
        """Drop leftover ``suffix`` tables (an interrupted rebuild)."""
        with self.transaction():
            for table in TABLES:
                self.execute(f"DROP TABLE IF EXISTS {table.name}{suffix}")


class PostgresSchema(SchemaMethods):
    """The read-model DDL in PostgreSQL's types, with its advisory lock, comments and renames."""

    types: ClassVar[dict[str, str]] = {
        "uuid": "uuid",
        "text": "text",
        "int": "bigint",
        "float": "double precision",
        "bool": "boolean",
        "timestamp": "timestamptz",
        "date": "date",
        "json": "jsonb",
    }
    create_view = "CREATE OR REPLACE VIEW"
    utc_day = "({} AT TIME ZONE 'UTC')::date"

    lock_wait: float = DEFAULT_LOCK_WAIT
    """Seconds a creator waits for its turn before :class:`~actae.StoreBusyError`."""

    if TYPE_CHECKING:  # provided by PostgresReadModels

        @property
        def conn(self) -> psycopg.Connection[Any]:
            """The connection of the transaction the statements run in."""
            ...

    def take_turns(self) -> None:
        """Creators take turns on the tracking table, a lock only the store's owner can take.

        Processes that start at once (a worker and the projector) would otherwise race:
        two sessions that change one catalog row at once fail ("tuple concurrently
        updated"). The turn is a table lock, not an advisory one, so that no other role
        (an analyst's) can hold every process's start up
        (:mod:`actae.adapters.persistence.turns`).
        """
        take_turn(self.conn, sql.Identifier(TRACKING), self.lock_wait)

    def _describe(self) -> None:
        """``COMMENT ON`` each table, view and column whose comment is not its description.

        Only what differs is written: opening the read models costs one catalog read, and a
        table made, upgraded or swapped in by a rebuild (whose views are new) gets its own.
        """
        rows = self.execute(
            "SELECT c.relname, a.attname, d.description FROM pg_description d "
            "JOIN pg_class c ON c.oid = d.objoid AND d.classoid = 'pg_class'::regclass "
            "LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = d.objsubid "
            "AND d.objsubid > 0 "
            "WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())"
        ).fetchall()
        present = {(relation, column): text for relation, column, text in rows}
        for kind, relation, column, text in descriptions():
            if present.get((relation, column)) != text:
                target = f"{kind} {relation}" if column is None else f"COLUMN {relation}.{column}"
                literal = text.replace("'", "''")
                self.execute(f"COMMENT ON {target} IS '{literal}'")

    def _move_indexes(self, table: Table, suffix: str) -> None:
        """Rename them: indexes are named after the table they were created for."""
        self.execute(f"ALTER INDEX {table.name}{suffix}_pkey RENAME TO {table.name}_pkey")
        for columns in table.indexes:
            self.execute(
                f"ALTER INDEX {index_name(table.name + suffix, columns)} "
                f"RENAME TO {index_name(table.name, columns)}"
            )


class SqliteSchema(SchemaMethods):
    """The read-model DDL in SQLite's types; SQLite cannot rename an index, so it rebuilds."""

    types: ClassVar[dict[str, str]] = {
        "uuid": "TEXT",
        "text": "TEXT",
        "int": "INTEGER",
        "float": "REAL",
        "bool": "INTEGER",
        "timestamp": "TEXT",
        "date": "TEXT",
        "json": "TEXT",
    }
    create_view = "CREATE VIEW IF NOT EXISTS"
    utc_day = "date({})"  # ISO 8601 text with its offset: date() gives the UTC date

    def take_turns(self) -> None:
        """Nothing to do: the transaction's ``BEGIN IMMEDIATE`` already makes creators wait."""

    def _describe(self) -> None:
        """Nothing to do: SQLite has no comments; the descriptions are in docs/read-models.md."""

    def _move_indexes(self, table: Table, suffix: str) -> None:
        """Drop the rebuild's indexes and create the live ones (SQLite cannot rename one)."""
        for columns in table.indexes:
            self.execute(f"DROP INDEX {index_name(table.name + suffix, columns)}")
        for statement in self._create_indexes(table, ""):
            self.execute(statement)
