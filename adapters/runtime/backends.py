"""One object per kind of database: the only module that knows which one a store is on.

Everything that differs between PostgreSQL and SQLite (``memory://`` too) is a method of the
:class:`Backend` that :func:`backend_for` gives ``actae.open``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any
from uuid import UUID

from eventsourcing.persistence import ApplicationRecorder, Mapper
from psycopg import sql

from actae.adapters.custody.tables import PostgresTables, SQLiteTables, Tables
from actae.adapters.persistence.awaiting import blocking
from actae.adapters.persistence.clock import read_clock_with, store_clock
from actae.adapters.persistence.forgets import ForgetWatch
from actae.adapters.persistence.migrations import open_postgres, open_sqlite
from actae.adapters.persistence.offloaded import ActaeSQLiteRecorder
from actae.adapters.persistence.postgres import ActaePostgresRecorder, DatabaseClock
from actae.adapters.persistence.recorders import EventStore, Mappers, postgres_store, sqlite_store
from actae.adapters.persistence.url import StoreUrl
from actae.adapters.readside.readmodels import ReadModelDB, postgres_db, sqlite_db
from actae.adapters.runtime.service import ActaeService
from actae.domain.errors import ValidationError
from actae.domain.ports import Clock

ServiceFactory = Callable[[bool], ActaeService]
"""Builds the store's service; its argument says whether the event tables may be created."""
BACKLOG_CAP = 1_000_000
"""Events counted after a position at most: a gauge scraped every few seconds must not scan a
backlog of millions each time."""
CHUNK = 500
"""Ids a purge's query names at most (SQLite's limit on parameters)."""


class Backend:
    """What differs between databases; each kind overrides the hooks it needs (no IO)."""

    name = ""
    """The database's kind, for messages."""
    open_hint = "check the URL, and that the server is running and reachable from here"
    """What to check when the store cannot be opened (the CLI's one line)."""
    reads_ahead = False
    """Whether a projector may read the next page beside its read-model transaction."""

    _recorder: ActaePostgresRecorder | ActaeSQLiteRecorder
    """The event store's recorder (from :meth:`event_store` on)."""

    def __init__(self, url: StoreUrl) -> None:
        self.url = url

    def clock(self, given: Clock | None) -> Clock:
        """The store's clock: ``given``, else this host's wall time."""
        return store_clock(given)

    def open(self, build: ServiceFactory, *, create: bool) -> ActaeService | None:
        """The service, after its schema is migrated; ``None`` when no store is there."""
        raise NotImplementedError

    def event_store(self, mappers: Mappers, *, create_tables: bool) -> EventStore:
        """The recorder and the mappers over it."""
        raise NotImplementedError

    def _kept(self, mappers: Mappers) -> Mappers:
        """``mappers``, keeping the recorder they are made over as this backend's."""

        def over(recorder: ApplicationRecorder) -> tuple[Mapper[Any], Mapper[Any]]:
            assert isinstance(recorder, ActaePostgresRecorder | ActaeSQLiteRecorder)  # noqa: S101
            self._recorder = recorder
            return mappers(recorder)

        return over

    def tables(self) -> Tables:
        """The custody tables: keys, secrets and artifacts (asked by the event store's mappers)."""
        raise NotImplementedError

    def forget_watch(self) -> ForgetWatch:
        """What the recorder's reads saw of forgets (asked by its mappers)."""
        return self._recorder.forgets

    def read_models(self) -> ReadModelDB:
        """The read models, next to the events."""
        raise NotImplementedError

    def attach_clock(self, clock: Clock) -> None:
        """Let the store's clock take its readings through the event store (SQLite: no need)."""

    async def connect_async(self) -> None:
        """Open what an ``AsyncStore``'s coroutines use (nothing: SQLite runs in threads)."""

    async def close_async(self) -> None:
        """Close what :meth:`connect_async` opened."""

    def events_after(self, position: int, cap: int = BACKLOG_CAP) -> int:
        """How many events are stored after ``position``, counted up to ``cap``.

        Counted, not subtracted: positions come in blocks on PostgreSQL, and purges leave holes.
        """
        raise NotImplementedError

    def delete_events(
        self, *, everything_of: Sequence[UUID], history_of: Sequence[UUID], keep_topic: str
    ) -> int:
        """Delete the events of ``everything_of``, and of ``history_of`` all but ``keep_topic``.

        The one delete of events, after the run's tombstone (positions stay monotonic).
        """
        raise NotImplementedError

    def still_stored(self, ids: Sequence[UUID]) -> set[UUID]:
        """Which of ``ids`` (aggregates) still have events."""
        raise NotImplementedError

    def server(self, field: str, *, needed_by: str, missing: str) -> dict[str, str]:
        """The database server's libpq parameters; ``ValidationError`` on ``field`` without."""
        raise ValidationError(
            field,
            f"{needed_by}needs a PostgreSQL store (postgresql://...); {self.name} has no {missing}",
        )

    def close(self) -> None:
        """Let go of what the backend itself holds (after the store's connections)."""


class PostgresBackend(Backend):
    """A schema of a PostgreSQL database: the server's clock, LISTEN, one statement a write."""

    name = "postgresql"
    reads_ahead = True
    _recorder: ActaePostgresRecorder

    def clock(self, given: Clock | None) -> Clock:
        """The store's clock: ``given``, else the database server's (every host agrees)."""
        conninfo = self.url.postgres_conninfo
        return store_clock(given, lambda: DatabaseClock(conninfo))

    def open(self, build: ServiceFactory, *, create: bool) -> ActaeService | None:
        """The service, after the schema's migrations ran (one process at a time)."""
        url = self.url
        conninfo, schema = url.postgres_conninfo, url.postgres_schema
        return open_postgres(conninfo, schema, build, create=create, lock_wait=url.lock_wait)

    def event_store(self, mappers: Mappers, *, create_tables: bool) -> EventStore:
        """Events in the URL's schema, through a pool of the URL's size."""
        return postgres_store(self.url, create_tables=create_tables, mappers=self._kept(mappers))

    def tables(self) -> Tables:
        """One statement (or short transaction) at a time, through the process's pool."""
        return PostgresTables(self.url, self._recorder.datastore.pool)

    def read_models(self) -> ReadModelDB:
        """The read models in the store's schema, on the event store's connections."""
        url = self.url
        return postgres_db(self._recorder, url.postgres_conninfo, lock_wait=url.lock_wait)

    def attach_clock(self, clock: Clock) -> None:
        """The database clock reads through the event store's pool: no connection of its own."""
        read_clock_with(clock, self._recorder.query)

    async def connect_async(self) -> None:
        """Open psycopg's ``AsyncConnectionPool`` beside the blocking one."""
        await self._recorder.attach_async_pool()

    async def close_async(self) -> None:
        """Close the async pool."""
        await self._recorder.close_async_pool()

    def _events_table(self) -> sql.Identifier:
        return sql.Identifier(self._recorder.datastore.schema, self._recorder.events_table_name)

    def events_after(self, position: int, cap: int = BACKLOG_CAP) -> int:
        """Counted by one statement."""
        statement = sql.SQL(
            "SELECT count(*) FROM (SELECT 1 FROM {} WHERE notification_id > %s LIMIT %s) AS e"
        ).format(self._events_table())
        ((count,),) = self._recorder._execute(statement.as_string(), [position, cap])
        return int(count)

    @blocking
    def delete_events(
        self, *, everything_of: Sequence[UUID], history_of: Sequence[UUID], keep_topic: str
    ) -> int:
        """One statement."""
        statement = sql.SQL(
            "DELETE FROM {} WHERE originator_id = ANY(%s)"
            " OR (originator_id = ANY(%s) AND topic <> %s)"
        ).format(self._events_table())
        with self._recorder.datastore.transaction(commit=True) as cursor:
            cursor.execute(statement, (list(everything_of), list(history_of), keep_topic))
            return cursor.rowcount

    @blocking
    def still_stored(self, ids: Sequence[UUID]) -> set[UUID]:
        """One query per ``CHUNK`` ids, not one each."""
        statement = sql.SQL(
            "SELECT DISTINCT originator_id FROM {} WHERE originator_id = ANY(%s)"
        ).format(self._events_table())
        found: set[UUID] = set()
        with self._recorder.datastore.transaction(commit=False) as cursor:
            for start in range(0, len(ids), CHUNK):
                cursor.execute(statement, (list(ids[start : start + CHUNK]),))
                found.update(UUID(str(row["originator_id"])) for row in cursor.fetchall())
        return found

    def server(self, field: str, *, needed_by: str, missing: str) -> dict[str, str]:
        """The URL's libpq parameters."""
        return dict(self.url.postgres_conninfo)


class SqliteBackend(Backend):
    """A SQLite file: every connection opens ``database``, analysts' queries ``read_only``."""

    name = "sqlite"
    open_hint = "check the path (its folder must exist and be writable)"
    _recorder: ActaeSQLiteRecorder

    def __init__(self, url: StoreUrl, database: str, read_only: str) -> None:
        super().__init__(url)
        self.database = database
        self.read_only = read_only

    def open(self, build: ServiceFactory, *, create: bool) -> ActaeService | None:
        """The service over the file; with ``create=False`` a missing file stays missing."""
        path = self.database
        if not create and not os.path.isfile(path):
            return None  # checked first: connecting would create the file
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):  # SQLite would only say "unable to open database file"
            raise ValidationError("url", f"the folder {folder} does not exist; create it first")
        return open_sqlite(path, build, create=create)

    def event_store(self, mappers: Mappers, *, create_tables: bool) -> EventStore:
        """Events in table ``stored_events``."""
        kept = self._kept(mappers)
        return sqlite_store(self.database, create_tables=create_tables, mappers=kept)

    def tables(self) -> Tables:
        """On connections of their own, one per call."""
        return SQLiteTables(self.database)

    def read_models(self) -> ReadModelDB:
        """The read models in the same database as the events."""
        return sqlite_db(self.database, self.read_only)

    @blocking
    def events_after(self, position: int, cap: int = BACKLOG_CAP) -> int:
        """Counted by one query."""
        table = self._recorder.events_table_name
        statement = f"SELECT count(*) FROM (SELECT 1 FROM {table} WHERE rowid > ? LIMIT ?)"  # noqa: S608
        with self._recorder.datastore.transaction(commit=False) as cursor:
            cursor.execute(statement, (position, cap))
            return int(cursor.fetchone()[0])

    @blocking
    def delete_events(
        self, *, everything_of: Sequence[UUID], history_of: Sequence[UUID], keep_topic: str
    ) -> int:
        """The row with the largest ``rowid`` stays: SQLite gives a new row that plus one."""
        table = self._recorder.events_table_name
        deleted = 0
        with self._recorder.datastore.transaction(commit=True) as cursor:
            for ids, keep in ((everything_of, None), (history_of, keep_topic)):
                for part, marks in _chunks(ids):
                    kept = "" if keep is None else " AND topic <> ?"
                    where = f"originator_id IN ({marks}){kept}"
                    where += f" AND rowid < (SELECT max(rowid) FROM {table})"  # noqa: S608
                    params = [*part] if keep is None else [*part, keep]
                    statement = f"DELETE FROM {table} WHERE {where} RETURNING 1"  # noqa: S608
                    cursor.execute(statement, params)
                    deleted += len(cursor.fetchall())
        return deleted

    @blocking
    def still_stored(self, ids: Sequence[UUID]) -> set[UUID]:
        """A query per ``CHUNK`` ids."""
        table = self._recorder.events_table_name
        found: set[UUID] = set()
        with self._recorder.datastore.transaction(commit=False) as cursor:
            for part, marks in _chunks(ids):
                statement = (
                    f"SELECT DISTINCT originator_id FROM {table} WHERE originator_id IN ({marks})"  # noqa: S608
                )
                cursor.execute(statement, part)
                found.update(UUID(str(row[0])) for row in cursor.fetchall())
        return found


def _chunks(ids: Sequence[UUID]) -> Iterator[tuple[list[str], str]]:
    """``ids`` as SQLite stores them, ``CHUNK`` at a time (its limit on parameters), with marks."""
    for start in range(0, len(ids), CHUNK):
        part = [i.hex for i in ids[start : start + CHUNK]]
        yield part, ", ".join("?" * len(part))


MEMORY = "/dev/shm"  # noqa: S108 - a private folder is made inside it
"""Where ``memory://`` databases live: memory (tmpfs), where the system has it."""


class MemoryBackend(SqliteBackend):
    """SQLite in memory (``memory://``): always new, gone when the store closes.

    A file in a private folder on tmpfs, so WAL's readers work beside a writer: ``memdb``
    has no WAL, and a shared cache locks a second writer out or shows uncommitted rows.
    """

    name = "memory"
    open_hint = "memory:// makes a SQLite file in /dev/shm or the temporary folder"

    def __init__(self, url: StoreUrl) -> None:
        super().__init__(url, "", "")
        self._removal: weakref.finalize[Any, MemoryBackend] | None = None

    def open(self, build: ServiceFactory, *, create: bool) -> ActaeService | None:
        """A new store, whatever ``create`` says: there is never one to open."""
        if self._removal is None:
            where = MEMORY if os.path.isdir(MEMORY) else None
            folder = tempfile.mkdtemp(prefix="actae-memory-", dir=where)
            self._removal = weakref.finalize(self, _remove_own, folder, os.getpid())
            self.database = os.path.join(folder, "store.db")
            self.read_only = f"{Path(self.database).as_uri()}?mode=ro"
        return open_sqlite(self.database, build, create=True)

    def close(self) -> None:
        """Remove the database's folder (after the store closed its connections)."""
        if self._removal is not None:
            self._removal()


def _remove_own(folder: str, owner: int) -> None:
    """Remove a ``memory://`` folder, only in the process that made it (not a forked child)."""
    if os.getpid() == owner:
        shutil.rmtree(folder, ignore_errors=True)


def backend_for(url: StoreUrl) -> Backend:
    """The backend of a parsed store URL (no IO)."""
    if url.backend == "postgresql":
        return PostgresBackend(url)
    path = url.sqlite_path
    if path is None or path.startswith(":memory:") or "mode=memory" in path:
        return MemoryBackend(url)  # a SQLite URL of a private in-memory database, too
    return SqliteBackend(url, path, f"{Path(path).absolute().as_uri()}?mode=ro")
