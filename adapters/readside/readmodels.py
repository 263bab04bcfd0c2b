"""Read-model tables in PostgreSQL or SQLite: coalesced upserts, tracking, swap.

A batch of events is applied in one transaction with its tracking position, under the
tracking row's lock: a position is applied fully or not at all, and never by two projectors.
:class:`ReadModelDB` writes each statement once; one class per backend holds what differs
(parameters, stored values, locking, DDL, connections), so no method asks which backend it
runs on.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from abc import abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, ClassVar
from uuid import UUID

import psycopg
from psycopg import sql
from psycopg.rows import tuple_row
from psycopg.types.json import Jsonb

from actae.adapters.persistence.clock import wall_clock
from actae.adapters.persistence.postgres import ActaePostgresRecorder
from actae.adapters.persistence.turns import DEFAULT_LOCK_WAIT, take_turn
from actae.adapters.readside.analyst_sql import (
    PostgresQueries,
    SqliteQueries,
    read_only_sqlite,
    rows_of,
)
from actae.adapters.readside.grants import regrant
from actae.adapters.readside.schema import (
    COLUMN_TYPES,
    ERRORS,
    TRACKING,
    SchemaMethods,
    descriptions,
    index_name,
)
from actae.adapters.readside.standings import (
    CLAIMED,
    expire_sql,
    lease_ran_out,
    refresh_runs,
    runs_of_effects,
)
from actae.projections.changes import Change, Count, EffectOwner, PurgeRun, Upsert
from actae.projections.tables import TABLES, Table


class ReadModelDB(SchemaMethods):
    """The read models' statements and transactions (one subclass per backend).

    Each unit of work runs on the connection :meth:`_borrowed` gives it. Statements take
    each parameter as ``self.mark``: sqlite3 takes ``?``, psycopg ``%s``.
    """

    name: ClassVar[str]  # the backend, as a URL names it
    mark: ClassVar[str]  # the driver's positional parameter
    lock_suffix: ClassVar[str]
    """What a SELECT ends with to lock its rows until the transaction ends."""

    @abstractmethod
    def adapt(self, value: Any) -> Any:
        """A Python value in the form this backend's driver stores."""

    @abstractmethod
    def reconnect(self) -> None:
        """Recover the connections before a retry (after a transient failure)."""

    @abstractmethod
    def _borrowed(self) -> AbstractContextManager[Any]:
        """The connection of this thread's transaction, else one for a single statement."""

    def close(self) -> None:
        """Let go of what the read models hold of their own."""

    # -- statements -----------------------------------------------------------------------

    def execute(self, statement: str, params: Sequence[Any] = ()) -> Any:
        """Run one statement; its cursor."""
        with self._borrowed() as conn:
            return conn.execute(statement, params)

    @abstractmethod
    def executemany(self, statement: str, rows: list[Sequence[Any]]) -> None:
        """Run one statement for many rows."""

    def query(self, statement: str, params: Any = None) -> list[dict[str, Any]]:
        """Rows of one of Actae's own statements, as dicts (trusted SQL only).

        An analyst's statement goes through :meth:`read_only_query` instead, whose guards
        cost a read-only transaction per call.
        """
        with self._borrowed() as conn:
            return rows_of(conn.execute(statement, params or ()))

    analysts: PostgresQueries | SqliteQueries  # on a connection of the call's own

    def read_only_query(self, statement: str, params: Any = None) -> list[dict[str, Any]]:
        """Rows of an analyst's one statement, run where it cannot write (``analyst_sql``)."""
        return self.analysts.run(statement, params)

    @abstractmethod
    def transaction(self) -> AbstractContextManager[None]:
        """A transaction, or a savepoint inside one."""

    # -- tracking -------------------------------------------------------------------------

    def lock_position(self, name: str) -> int:
        """The tracked position of ``name``, locked until the transaction ends."""
        select = f"SELECT position FROM {TRACKING} WHERE name = {self.mark}{self.lock_suffix}"
        row = self.execute(select, (name,)).fetchone()
        if row is None:  # first use of this name: create the row, then lock it
            self.execute(
                f"INSERT INTO {TRACKING} (name, position) VALUES ({self.mark}, 0) "
                "ON CONFLICT (name) DO NOTHING",
                (name,),
            )
            row = self.execute(select, (name,)).fetchone()
        return int(row[0])

    def set_position(self, name: str, position: int) -> None:
        """Move ``name``'s tracked position (inside the batch's transaction)."""
        p = self.mark
        self.execute(f"UPDATE {TRACKING} SET position = {p} WHERE name = {p}", (position, name))

    def move_position(self, name: str, expected: int, position: int) -> int:
        """Move ``name``'s position from ``expected`` to ``position``; the position found.

        One statement locks and moves while batches flow; a position another projector
        moved (or a rebuild forgot) stays as it is, locked until the transaction ends.
        """
        p = self.mark
        move = (
            f"UPDATE {TRACKING} SET position = {p} WHERE name = {p} AND position = {p} "
            "RETURNING position"
        )
        if self.execute(move, (position, name, expected)).fetchone() is not None:
            return expected
        found = self.lock_position(name)  # moved by another, or a first use (made at 0)
        if found == expected:
            self.set_position(name, position)
        return found

    def forget(self, name: str) -> None:
        """Remove a tracking row (inside a transaction)."""
        self.execute(f"DELETE FROM {TRACKING} WHERE name = {self.mark}", (name,))

    def position(self, name: str) -> int:
        """The tracked position, without locking."""
        rows = self.query(f"SELECT position FROM {TRACKING} WHERE name = {self.mark}", (name,))
        return int(rows[0]["position"]) if rows else 0

    def record_error(
        self, name: str, position: int, topic: str, originator: str, error: str
    ) -> None:
        """Keep a poison event's error visible (inside the batch's transaction)."""
        self.execute(
            f"INSERT INTO {ERRORS} (name, position, topic, originator_id, error, "
            f"recorded_at) VALUES ({', '.join([self.mark] * 6)}) ON CONFLICT DO NOTHING",
            (name, position, topic, originator, error[:4000], self.adapt(wall_clock())),
        )

    # -- changes --------------------------------------------------------------------------

    def apply(self, changes: list[Change], suffix: str = "") -> None:
        """Coalesce a batch's changes per row, then write them with one statement per shape."""
        self.write(Batch.of(changes), suffix)

    def write(self, batch: Batch, suffix: str = "") -> None:
        """Write a batch's rows, then counts, owners and purges, then the runs' standing.

        Counts add to the rows' columns and owners come from effects rows the batch may
        have made, so the order matters.
        """
        self._write_rows(batch, suffix)
        self._write_counts(batch, suffix)
        self._write_owners(batch, suffix)
        self._write_purges(batch, suffix)
        runs = batch.runs | runs_of_effects(self, batch.effects, suffix)
        refresh_runs(self, runs, suffix)

    def _write_rows(self, batch: Batch, suffix: str) -> None:
        shapes: dict[tuple[str, tuple[str, ...]], list[list[Any]]] = {}
        for (name, key), values in batch.rows.items():
            columns = tuple(values)
            shapes.setdefault((name, columns), []).append(
                [*self._key(BY_NAME[name], key), *(self.adapt(values[c]) for c in columns)]
            )
        for (name, columns), rows in shapes.items():
            self._upsert_rows(BY_NAME[name], columns, rows, suffix)

    @abstractmethod
    def _upsert_rows(
        self, table: Table, columns: tuple[str, ...], rows: list[list[Any]], suffix: str
    ) -> None:
        """Insert or update ``rows`` (key values, then ``columns``' values; distinct keys)."""

    def _write_counts(self, batch: Batch, suffix: str) -> None:
        for (name, column), counted in batch.counts.items():
            table = BY_NAME[name]
            rows: list[Sequence[Any]] = [
                [*self._key(table, key), by] for key, by in counted.items()
            ]
            self.executemany(self._count(table, column, suffix), rows)

    def _write_owners(self, batch: Batch, suffix: str) -> None:
        for name, owned in batch.owners.items():
            table = BY_NAME[name]
            rows: list[Sequence[Any]] = [
                [self.adapt(effect), self.adapt(effect), *self._key(table, key)]
                for key, effect in owned.items()
            ]
            self.executemany(self._owner(table, suffix), rows)

    def _write_purges(self, batch: Batch, suffix: str) -> None:
        p = self.mark
        rows: list[Sequence[Any]] = [[self.adapt(run)] for run in batch.purged]
        if rows:
            self.executemany(f"DELETE FROM effects{suffix} WHERE run_id = {p}", rows)
            self.executemany(
                f"UPDATE audit{suffix} SET detail = NULL WHERE run_id = {p} AND action <> 'purge'",
                rows,
            )

    def _key(self, table: Table, key: Any) -> list[Any]:
        """A row's key as statement parameters, one per key column."""
        values = (key,) if len(table.keys) == 1 else tuple(key)
        return [self.adapt(value) for value in values]

    def expire_claims(self, now: datetime, suffix: str = "") -> datetime | None:
        """Mark claims whose lease ran out by ``now`` in doubt and refresh their runs.

        No event records a lease running out, so the projector and a rebuild call this on
        the store's clock, inside a transaction. Returns when the next live claim's lease
        runs out (None: no live claim), when calling again is worthwhile.
        """
        effects = f"effects{suffix}"
        at = self.adapt(now)
        expire = expire_sql(effects, self.mark)
        changed = {row[0] for row in self.execute(expire, (at, at)).fetchall()}
        refresh_runs(self, changed, suffix)
        (row,) = self.execute(
            f"SELECT min(expires_at) FROM {effects} WHERE {CLAIMED} "
            f"AND NOT ({lease_ran_out(self.mark)})",
            (at,),
        ).fetchall()
        return moment(row[0])

    # -- retention's candidates (each checked against its stored run before a write) ------

    def due_runs(
        self,
        rules: Sequence[tuple[str | None, str, datetime]],
        own_agents: Sequence[str],
        *,
        held: bool,
        limit: int,
    ) -> list[UUID]:
        """Finished runs a retention rule makes due, not purged, oldest end first.

        ``rules`` are (agent, status, ended by); an agent of ``None`` means every agent not
        in ``own_agents``. With ``held``: the runs a legal hold keeps instead.
        """
        if not rules:
            return []
        p = self.mark
        params: list[Any] = []
        clauses = []
        for agent, status, ended_by in rules:
            clause = f"(lifecycle = {p} AND ended_at <= {p}"
            params += [status, self.adapt(ended_by)]
            if agent is not None:
                clause += f" AND agent_id = {p}"
                params.append(agent)
            elif own_agents:
                clause += f" AND agent_id NOT IN ({', '.join([p] * len(own_agents))})"
                params += list(own_agents)
            clauses.append(clause + ")")
        hold = "coalesce(held, FALSE)" if held else "NOT coalesce(held, FALSE)"
        with self.transaction():
            rows = self.execute(
                f"SELECT run_id FROM run_status WHERE purged_at IS NULL AND {hold} "
                f"AND ({' OR '.join(clauses)}) ORDER BY ended_at, run_id LIMIT {int(limit)}",
                params,
            ).fetchall()
        return [UUID(str(row[0])) for row in rows]

    def recently(self, column: str, since: datetime) -> list[tuple[UUID, UUID]]:
        """Runs (and their channels) whose ``column`` (forgotten_at, purged_at) is since."""
        p = self.mark
        with self.transaction():
            rows = self.execute(
                f"SELECT run_id, channel_id FROM run_status WHERE {column} >= {p}",
                (self.adapt(since),),
            ).fetchall()
        return [(UUID(str(row[0])), UUID(str(row[1]))) for row in rows]

    def effect_keys_of(self, run_ids: Sequence[Any]) -> list[str]:
        """The ledger keys of these runs' effects (and of their steps' attempt counters)."""
        p = self.mark
        keys: list[str] = []
        with self.transaction():
            for run_id in run_ids:
                run = self.adapt(UUID(str(run_id)))
                rows = self.execute(
                    f"SELECT effect_key FROM effects WHERE run_id = {p}", (run,)
                ).fetchall()
                keys.extend(str(row[0]) for row in rows)
        return keys

    @staticmethod
    def _on_conflict(table: Table, columns: tuple[str, ...]) -> str:
        """What an upsert of ``columns`` does to a row that exists: updates just those."""
        update = ", ".join(f"{c} = excluded.{c}" for c in columns)
        action = f"DO UPDATE SET {update}" if columns else "DO NOTHING"
        return f"ON CONFLICT ({', '.join(table.keys)}) {action}"

    def _count(self, table: Table, column: str, suffix: str) -> str:
        """Add to ``column`` of a row (made if missing); a null column stays null (unknown)."""
        keys = ", ".join(table.keys)
        marks = ", ".join([self.mark] * (len(table.keys) + 1))
        return (
            f"INSERT INTO {table.name}{suffix} AS t ({keys}, {column}) VALUES ({marks}) "
            f"ON CONFLICT ({keys}) DO UPDATE SET {column} = t.{column} + excluded.{column}"
        )

    def _owner(self, table: Table, suffix: str) -> str:
        """Fill a row's ``run_id`` and ``effect_key`` from its effect's row."""
        p = self.mark
        effect = f"FROM effects{suffix} WHERE effect_id = {p}"
        where = " AND ".join(f"{k} = {p}" for k in table.keys)
        return (
            f"UPDATE {table.name}{suffix} SET run_id = (SELECT run_id {effect}), "
            f"effect_key = (SELECT effect_key {effect}) WHERE {where}"
        )

    def snapshot(self, suffix: str = "") -> dict[str, list[dict[str, Any]]]:
        """Every row of every read model, ordered by key (for comparisons)."""
        return {
            t.name: self.query(f"SELECT * FROM {t.name}{suffix} ORDER BY {', '.join(t.keys)}")
            for t in TABLES
        }


@dataclass
class Batch:
    """A batch's changes coalesced: one write per row, one sum per counted column of a row.

    Keyed by table name: hashing a table per change would cost more than the merge.
    """

    rows: dict[tuple[str, Any], dict[str, Any]] = field(default_factory=dict)
    counts: dict[tuple[str, str], dict[Any, int]] = field(default_factory=dict)
    owners: dict[str, dict[Any, Any]] = field(default_factory=dict)
    effects: set[Any] = field(default_factory=set)  # whose runs' standing to recompute
    purged: set[Any] = field(default_factory=set)  # runs whose effects and audit details go
    runs: set[Any] = field(default_factory=set)  # whose standing to recompute

    @classmethod
    def of(cls, changes: list[Change]) -> Batch:
        """The changes of a batch, in order, merged per row."""
        batch = cls()
        for change in changes:
            batch.add(change)
        return batch

    def add(self, change: Change) -> None:
        """Merge one change into the batch (a later value of a column wins; counts add up)."""
        if isinstance(change, Upsert):
            key = (change.table.name, change.key)
            row = self.rows.get(key)
            if row is None:  # most changes go to a row the batch has already
                self.rows[key] = {**change.values}
            else:
                row.update(change.values)
        elif isinstance(change, Count):
            counted = self.counts.setdefault((change.table.name, change.column), {})
            counted[change.key] = counted.get(change.key, 0) + change.by
        elif isinstance(change, EffectOwner):
            self.owners.setdefault(change.table.name, {})[change.key] = change.effect_id
        elif isinstance(change, PurgeRun):
            self.purged.add(change.run_id)
        elif change.effect_id is not None:
            self.effects.add(change.effect_id)
        elif change.run_id is not None:
            self.runs.add(change.run_id)


BY_NAME = {table.name: table for table in TABLES}


def moment(value: Any) -> datetime | None:
    """A timestamp column's value as an aware datetime (SQLite stores ISO text)."""
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(value)


_LENT: ContextVar[Mapping[PostgresReadModels, psycopg.Connection[Any]]] = ContextVar(
    "actae_read_models_lent", default=MappingProxyType({})
)
"""The connection each PostgreSQL read-model object lends its current unit of work.

Per context, not per thread: the coroutines an ``AsyncWorker`` serves share the loop's
thread, and each must see its own transaction."""


class PostgresReadModels(ReadModelDB):
    """Read models on PostgreSQL, on the process's pool: psycopg's parameters, row locks.

    A transaction borrows a connection the way the event store's recorder does, for its
    length; a statement outside one borrows one for that statement. So an idle process
    holds one connection for events and read models alike.
    """

    name = "postgresql"
    mark = "%s"
    lock_suffix = " FOR UPDATE"
    types: ClassVar[dict[str, str]] = {name: pg for name, (pg, _) in COLUMN_TYPES.items()}
    create_view = "CREATE OR REPLACE VIEW"
    utc_day = "({} AT TIME ZONE 'UTC')::date"
    analysts: PostgresQueries

    def __init__(
        self, recorder: ActaePostgresRecorder, *, lock_wait: float = DEFAULT_LOCK_WAIT
    ) -> None:
        self._recorder = recorder
        self._datastore = recorder.datastore
        self._datastore.pool.open()  # as the recorder's first statement would (a no-op since)
        self.lock_wait = lock_wait  # for a creator's turn, then StoreBusyError

    @property
    def conn(self) -> psycopg.Connection[Any]:
        """The connection of this context's transaction (only inside :meth:`transaction`)."""
        conn = _LENT.get().get(self)
        if conn is None:
            raise RuntimeError("the read models' connection is lent inside a transaction only")
        return conn

    @contextmanager
    def _borrowed(self) -> Iterator[psycopg.Connection[Any]]:
        """The connection of this context's transaction, else a pooled one for the block.

        A session that refused a write is closed: after a failover it is a standby's.
        """
        held = _LENT.get().get(self)
        if held is not None:
            yield held
            return
        kept = self._recorder.kept
        conn = kept.take()
        rows = conn.row_factory
        lent: Token[Mapping[PostgresReadModels, psycopg.Connection[Any]]] | None = None
        try:
            conn.row_factory = tuple_row
            lent = _LENT.set({**_LENT.get(), self: conn})
            yield conn
        except psycopg.errors.ReadOnlySqlTransaction:
            conn.close()  # perhaps a standby's session: the pool connects anew, as the recorder
            raise
        finally:
            if lent is not None:
                _LENT.reset(lent)
            conn.row_factory = rows
            kept.give_back(conn)

    def adapt(self, value: Any) -> Any:
        """A dict as jsonb; psycopg stores every other value as it is."""
        return Jsonb(value) if isinstance(value, dict) else value

    def take_turns(self) -> None:
        """Creators take turns on the tracking table, a lock only the store's owner can take.

        Two sessions that change one catalog row at once fail ("tuple concurrently
        updated"). A table lock, not an advisory one, so that no other role (an analyst's)
        can hold every process's start up (:mod:`actae.adapters.persistence.turns`).
        """
        take_turn(self.conn, sql.Identifier(TRACKING), self.lock_wait)

    def _describe(self) -> None:
        """``COMMENT ON`` each table, view and column whose comment is not its description.

        Only what differs is written: opening the read models costs one catalog read.
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

    def swap_in(self, suffix: str) -> None:
        """Swap the rebuilt tables in, and grant them to the analyst roles (grant-analyst)."""
        super().swap_in(suffix)
        regrant(self.conn)

    def _move_indexes(self, table: Table, suffix: str) -> None:
        """Rename them: indexes are named after the table they were created for."""
        self.execute(f"ALTER INDEX {table.name}{suffix}_pkey RENAME TO {table.name}_pkey")
        for columns in table.indexes:
            self.execute(
                f"ALTER INDEX {index_name(table.name + suffix, columns)} "
                f"RENAME TO {index_name(table.name, columns)}"
            )

    def reconnect(self) -> None:
        """Have the pool test its idle connections and replace those the server dropped."""
        self._recorder._discard_dead_connections()  # the event store's own way

    def executemany(self, statement: str, rows: list[Sequence[Any]]) -> None:
        """Run one statement for many rows (psycopg's connection has no ``executemany``)."""
        with self._borrowed() as conn, conn.cursor() as cursor:
            cursor.executemany(statement, rows)

    def _upsert_rows(
        self, table: Table, columns: tuple[str, ...], rows: list[list[Any]], suffix: str
    ) -> None:
        """One statement for all rows, each column's values as one array.

        A statement per row costs more in the driver than the rest of a batch, and a text
        per batch size would be parsed afresh each time; this one depends only on the shape.
        """
        names = (*table.keys, *columns)
        arrays = ", ".join(f"%s::{self.types[table.column(n).type]}[]" for n in names)
        self.conn.execute(
            f"INSERT INTO {table.name}{suffix} ({', '.join(names)}) "
            f"SELECT * FROM unnest({arrays}) {self._on_conflict(table, columns)}",
            [list(values) for values in zip(*rows, strict=True)],
            binary=True,
        )

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """A transaction on a borrowed connection, or a savepoint inside one."""
        with self._borrowed() as conn, conn.transaction():
            yield


class SqliteReadModels(ReadModelDB):
    """Read models on SQLite: ``?`` parameters, text values, the write lock taken at once."""

    name = "sqlite"
    mark = "?"
    lock_suffix = ""  # BEGIN IMMEDIATE (``transaction``) already holds the database's lock
    types: ClassVar[dict[str, str]] = {name: lite for name, (_, lite) in COLUMN_TYPES.items()}
    create_view = "CREATE VIEW IF NOT EXISTS"
    utc_day = "date({})"  # ISO 8601 text with its offset: date() gives the UTC date
    analysts: SqliteQueries

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn  # the read models' own (a SQLite connection is a file handle)
        self.lock = threading.RLock()  # one connection, possibly shared by threads
        self._depth = 0  # of nested transactions: the outer one begins, inner ones save points

    @contextmanager
    def _borrowed(self) -> Iterator[sqlite3.Connection]:
        with self.lock:
            yield self.conn

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()

    def adapt(self, value: Any) -> Any:
        """Ids, moments, flags and documents as the text and integers SQLite stores."""
        if isinstance(value, UUID):
            return str(value)
        if isinstance(value, datetime):
            return value.astimezone(UTC).isoformat(timespec="microseconds")
        if isinstance(value, bool):
            return int(value)
        if isinstance(value, dict):
            return json.dumps(value, sort_keys=True)
        return value

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

    def reconnect(self) -> None:
        """Keep the connection: SQLite's transient error is a lock, not a lost connection."""

    def executemany(self, statement: str, rows: list[Sequence[Any]]) -> None:
        """Run one statement for many rows."""
        self.conn.executemany(statement, rows)

    def _upsert_rows(
        self, table: Table, columns: tuple[str, ...], rows: list[list[Any]], suffix: str
    ) -> None:
        """The statement for one row, run for each (sqlite3's loop is native code)."""
        names = (*table.keys, *columns)
        marks = ", ".join("?" * len(names))
        self.executemany(
            f"INSERT INTO {table.name}{suffix} ({', '.join(names)}) VALUES ({marks}) "
            f"{self._on_conflict(table, columns)}",
            list(rows),
        )

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """A transaction, or a savepoint inside one (SQLite takes the write lock at once)."""
        with self.lock:
            self._depth += 1
            name = f"sp{self._depth}"
            begin, commit, rollback = (
                ("BEGIN IMMEDIATE", "COMMIT", "ROLLBACK")
                if self._depth == 1
                else (f"SAVEPOINT {name}", f"RELEASE {name}", f"ROLLBACK TO {name}; RELEASE {name}")
            )
            try:
                self.conn.execute(begin)
                try:
                    yield
                except BaseException:
                    for statement in rollback.split("; "):
                        self.conn.execute(statement)
                    raise
                self.conn.execute(commit)
            finally:
                self._depth -= 1


def postgres_db(
    recorder: ActaePostgresRecorder,
    conninfo: dict[str, str],
    *,
    lock_wait: float = DEFAULT_LOCK_WAIT,
) -> ReadModelDB:
    """Read models in the store's schema, on the connections of the event store's ``recorder``.

    Creators wait ``lock_wait`` s for a turn; analysts' statements connect with ``conninfo``.
    """
    db = PostgresReadModels(recorder, lock_wait=lock_wait)
    db.analysts = PostgresQueries(conninfo, recorder.datastore.schema)
    return db


def sqlite_db(database: str, read_only: str) -> ReadModelDB:
    """Read models in the store's SQLite ``database``; ``read_only`` opens it for analysts."""
    conn = sqlite3.connect(
        database, uri=True, timeout=30, isolation_level=None, check_same_thread=False
    )
    conn.execute("PRAGMA journal_mode=WAL")  # an in-memory database keeps its own
    db = SqliteReadModels(conn)
    db.analysts = read_only_sqlite(read_only)
    return db
