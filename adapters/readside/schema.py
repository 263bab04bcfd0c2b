"""Read-model DDL of a rebuild: fresh tables made from :mod:`actae.projections.tables`, swapped in.

The live read models are made by the store's migrations; each backend's read models give the
column types, a timestamp's UTC day, the creators' turns, comments and index renames.
"""

# ruff: noqa: S608 - SQL assembled from our own constant table and column names, never input

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, ClassVar

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
COLUMN_TYPES = {
    "uuid": ("uuid", "TEXT"),
    "text": ("text", "TEXT"),
    "int": ("bigint", "INTEGER"),
    "float": ("double precision", "REAL"),
    "bool": ("boolean", "INTEGER"),
    "timestamp": ("timestamptz", "TEXT"),
    "date": ("date", "TEXT"),
    "json": ("jsonb", "TEXT"),
}
"""Each column type of :mod:`actae.projections.tables` as (PostgreSQL, SQLite) declare it."""


def index_name(table: str, columns: tuple[str, ...]) -> str:
    """``table_column_column``."""
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
    """``ReadModelDB`` methods that create, describe and swap the read-model tables."""

    types: ClassVar[dict[str, str]]
    """Each column type of :mod:`actae.projections.tables` as this backend declares it."""
    create_view: ClassVar[str]  # the statement's start that (re)creates a view
    utc_day: ClassVar[str]  # the UTC date of a timestamp column, as SQL ({} is the column)

    if TYPE_CHECKING:  # provided by ReadModelDB

        def transaction(self) -> AbstractContextManager[None]:
            """A transaction, or a savepoint inside one."""

        def execute(self, statement: str, params: Sequence[Any] = ()) -> Any:
            """Run one statement."""

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
        # What each usage row added to its channel's totals; the window partitions by workflow,
        # agent and model too (a channel is one run's), so a filter on those reaches run_status.
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
