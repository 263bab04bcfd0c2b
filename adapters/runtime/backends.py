"""One object per kind of database: the only module that knows which one a store is on.

``actae.open`` asks :func:`backend_for` once per URL; everything that differs between
PostgreSQL and SQLite is a method of the :class:`Backend` it gets: the event store and its
schema, the clock, the custody tables, the read models, how a reader wakes, and the few
statements written per database (counting a backlog, deleting a purged run's events).
Nothing else asks which database it runs on. ``memory://`` is SQLite too, in a file on
tmpfs (:class:`MemoryBackend`): the same recorder, tables and read models, gone when the
store closes.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from uuid import UUID

from eventsourcing.persistence import ApplicationRecorder, Mapper

from actae.adapters.custody.blobs import BlobStore, blob_store
from actae.adapters.custody.datakeys import SqlKeyTable, Transaction
from actae.adapters.custody.holding import SecretTable
from actae.adapters.custody.refs import RefRecorder
from actae.adapters.custody.tables import PostgresTables, SQLiteTables
from actae.adapters.persistence import backlog, purging
from actae.adapters.persistence.awaiting import off_the_loop
from actae.adapters.persistence.clock import read_clock_with, store_clock
from actae.adapters.persistence.forgets import KEYS_TABLE, SECRETS_TABLE, ForgetWatch
from actae.adapters.persistence.migrations import open_postgres, open_sqlite
from actae.adapters.persistence.offloaded import ActaeSQLiteRecorder
from actae.adapters.persistence.postgres import ActaePostgresRecorder
from actae.adapters.persistence.recorders import EventStore, Mappers, postgres_store, sqlite_store
from actae.adapters.persistence.url import StoreUrl
from actae.adapters.readside.readmodels import ReadModelDB, postgres_db, sqlite_db
from actae.adapters.runtime.service import ActaeService
from actae.domain.errors import ValidationError
from actae.domain.ports import Clock

ServiceFactory = Callable[[bool], ActaeService]
"""Builds the store's service; its argument says whether the event tables may be created."""
KeyTables = tuple[SqlKeyTable, SecretTable]
"""Where runs' data keys and the store's own secrets live."""
Custody = tuple[BlobStore, RefRecorder]
"""The artifacts' blob store and their references."""


class Backend:
    """What differs between databases; each kind overrides the hooks it needs.

    Built with no IO (:func:`backend_for`); :meth:`open` prepares the schema and the event
    store, :meth:`close` lets go of what only the backend holds.
    """

    name = ""
    """The database's kind, for messages."""
    open_hint = "check the URL, and that the server is running and reachable from here"
    """What to check when the store cannot be opened (the CLI's one line)."""
    reads_ahead = False
    """Whether a projector may read the next page beside its read-model transaction."""

    _recorder: ActaePostgresRecorder | ActaeSQLiteRecorder
    """The event store's recorder (from :meth:`event_store` on)."""
    _purging: purging.Purging
    """The deletes of a purge, and the look for what is left, in this database's SQL."""

    def __init__(self, url: StoreUrl) -> None:
        self.url = url

    def clock(self, given: Clock | None) -> Clock:
        """The store's clock: ``given``, else this host's wall time."""
        return store_clock(given, None)

    def open(self, build: ServiceFactory, *, create: bool) -> ActaeService | None:
        """The service, after its schema is migrated; ``None`` when no store is there."""
        raise NotImplementedError

    def event_store(self, mappers: Mappers, *, create_tables: bool) -> EventStore:
        """The recorder and the mappers over it."""
        raise NotImplementedError

    def key_tables(self) -> KeyTables:
        """Data keys and secrets in the event store's own database (asked by its mappers)."""
        raise NotImplementedError

    def forget_watch(self) -> ForgetWatch:
        """What the recorder's reads saw of forgets (asked by its mappers)."""
        return self._recorder.forgets

    def custody(self, spec: str | None) -> Custody:
        """The artifacts' blobs (where ``spec`` says: the database by default) and references."""
        raise NotImplementedError

    def read_models(self) -> ReadModelDB:
        """The read models, next to the events."""
        raise NotImplementedError

    def attach_clock(self, clock: Clock) -> None:
        """Let the store's clock take its readings through the event store (SQLite: no need)."""

    async def connect_async(self) -> None:
        """Open what an ``AsyncStore``'s coroutines use (nothing: SQLite runs in threads)."""

    async def close_async(self) -> None:
        """Close what :meth:`connect_async` opened."""

    def events_after(self, position: int, cap: int = backlog.CAP) -> int:
        """How many events are stored after ``position``, counted up to ``cap``."""
        raise NotImplementedError

    def delete_events(
        self, *, everything_of: Sequence[UUID], history_of: Sequence[UUID], keep_topic: str
    ) -> int:
        """Delete the events of ``everything_of``, and of ``history_of`` all but ``keep_topic``.

        In one transaction; the answer is how many were deleted.
        """
        if not everything_of and not history_of:
            return 0
        delete = self._purging.delete_events
        return off_the_loop(delete, self._recorder, everything_of, history_of, keep_topic)

    def still_stored(self, originator_ids: Sequence[UUID]) -> set[UUID]:
        """Which of ``originator_ids`` still have events."""
        if not originator_ids:
            return set()
        return off_the_loop(self._purging.still_stored, self._recorder, originator_ids)

    def server(self, field: str, *, needed_by: str, missing: str) -> dict[str, str]:
        """The database server's libpq parameters; ``ValidationError`` on ``field`` without.

        The refusal says what needs the server and what this backend has not (``missing``).
        """
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
    _purging = purging.POSTGRES
    _recorder: ActaePostgresRecorder

    def clock(self, given: Clock | None) -> Clock:
        """The store's clock: ``given``, else the database server's (every host agrees)."""
        return store_clock(given, self.url.postgres_conninfo)

    def open(self, build: ServiceFactory, *, create: bool) -> ActaeService | None:
        """The service, after the schema's migrations ran (one process at a time)."""
        url = self.url
        return open_postgres(
            url.postgres_conninfo,
            url.postgres_schema,
            build,
            create=create,
            lock_wait=url.lock_wait,
        )

    def event_store(self, mappers: Mappers, *, create_tables: bool) -> EventStore:
        """Events in the URL's schema, through a pool of the URL's size."""

        def over(recorder: ApplicationRecorder) -> tuple[Mapper[Any], Mapper[Any]]:
            assert isinstance(recorder, ActaePostgresRecorder)  # noqa: S101 - made for it
            self._recorder = recorder
            return mappers(recorder)

        return postgres_store(self.url, create_tables=create_tables, mappers=over)

    def key_tables(self) -> KeyTables:
        """Data keys and secrets in the schema, through the event store's pool."""
        datastore = self._recorder.datastore
        begin: Transaction = lambda: datastore.transaction(commit=True)  # noqa: E731
        schema = f'"{self.url.postgres_schema}"'
        secrets = f"{schema}.{SECRETS_TABLE}"
        keys = SqlKeyTable(
            begin, table=f"{schema}.{KEYS_TABLE}", mark="%s", text_ids=False, secrets=secrets
        )
        return keys, SecretTable(begin, table=secrets, mark="%s")

    def custody(self, spec: str | None) -> Custody:
        """Blobs and references, one statement at a time through the process's pool."""
        tables = PostgresTables(self.url, self._recorder.datastore.pool)
        try:
            return blob_store(spec, tables), RefRecorder(tables)
        except BaseException:
            tables.close()
            raise

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

    def events_after(self, position: int, cap: int = backlog.CAP) -> int:
        """Counted by one statement."""
        return backlog.postgres_events_after(self._recorder, position, cap)

    def server(self, field: str, *, needed_by: str, missing: str) -> dict[str, str]:
        """The URL's libpq parameters."""
        return dict(self.url.postgres_conninfo)


class SqliteBackend(Backend):
    """A SQLite database: a file, or (:class:`MemoryBackend`) one in this process's memory.

    Every connection opens ``database`` (a path or a URI); analysts' queries open
    ``read_only``.
    """

    name = "sqlite"
    open_hint = "check the path (its folder must exist and be writable)"
    _purging = purging.SQLITE
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

        def over(recorder: ApplicationRecorder) -> tuple[Mapper[Any], Mapper[Any]]:
            assert isinstance(recorder, ActaeSQLiteRecorder)  # noqa: S101 - made for it
            self._recorder = recorder
            return mappers(recorder)

        return sqlite_store(self.database, create_tables=create_tables, mappers=over)

    def key_tables(self) -> KeyTables:
        """Data keys and secrets through the event store's connections."""
        datastore = self._recorder.datastore
        begin: Transaction = lambda: datastore.transaction(commit=True)  # noqa: E731
        keys = SqlKeyTable(begin, table=KEYS_TABLE, mark="?", text_ids=True, secrets=SECRETS_TABLE)
        return keys, SecretTable(begin, table=SECRETS_TABLE, mark="?")

    def custody(self, spec: str | None) -> Custody:
        """Blobs and references on connections of their own, one per call."""
        tables = SQLiteTables(self.database)
        return blob_store(spec, tables), RefRecorder(tables)

    def read_models(self) -> ReadModelDB:
        """The read models in the same database as the events."""
        return sqlite_db(self.database, self.read_only)

    def events_after(self, position: int, cap: int = backlog.CAP) -> int:
        """Counted by one query."""
        return off_the_loop(backlog.sqlite_events_after, self._recorder, position, cap)


MEMORY = "/dev/shm"  # noqa: S108 - a private folder is made inside it
"""Where ``memory://`` databases live: memory (tmpfs), where the system has it."""


class MemoryBackend(SqliteBackend):
    """SQLite in memory (``memory://``): always new, gone when the store closes.

    A SQLite file in a private folder of its own on tmpfs (``/dev/shm``; the system's
    temporary folder where there is none), so that it is the SQLite store in every respect:
    the recorder, custody tables, read models and analysts' read-only connections each
    open their own connection, with WAL's readers beside a writer. SQLite's in-memory
    databases cannot be that: ``memdb`` has no WAL, so a reader waits behind every write
    transaction (a projector's rebuild reads events inside its own and would wait for
    itself), and a shared cache answers a second writer with ``SQLITE_LOCKED`` at once, or
    lets readers see uncommitted rows. Two ``actae.open("memory://")`` make two folders;
    :meth:`close` (or the garbage collector, for a store never closed) removes it.
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
    """Remove a ``memory://`` folder, only in the process that made it.

    The finalizer also runs when a forked child's interpreter exits: the parent's store
    must not vanish under it.
    """
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
