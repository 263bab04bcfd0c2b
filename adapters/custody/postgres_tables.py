"""Artifacts in the store's PostgreSQL schema: blobs in chunk rows, and the runs' references.

**The process's pool, one statement at a time.** A gigabyte is a thousand chunk statements
each way. A connection per call would pay a connection set-up (and a TLS handshake,
remotely) for each; one connection held per write or per open stream would let slow
producers and forgotten readers take as many server connections as they like. So each
statement (or short transaction) checks a connection out of the store's pool, the one the
event store uses, and gives it back: nothing is pinned between two chunks, a long upload
holds a connection only while a chunk is sent, and concurrent writers and readers share a
bounded number of connections. (Given no pool, the tables open one of their own, of at
most the URL's ``pool_size`` connections, lazily.)

**Each chunk is its own autocommitted statement.** A blob written in one transaction would
keep that transaction open for as long as its source takes to produce a gigabyte (holding
back vacuum all that time) and pin its connection. Chunks are inserted under a fresh blob id
as they come; at the end one transaction names the blob (``INSERT … ON CONFLICT DO
NOTHING``) and, when the name was there already, deletes the new chunks: the content is
stored once. A marker row ``pending:<blob>`` exists while the chunks are written, so that
what a crash leaves behind is recognisable and :meth:`PostgresBlobs.sweep` can remove it.

Chunks are sent and fetched in binary (``%b`` and ``binary=True``), never as hex text, and
every statement names its tables with the store's schema rather than a ``search_path``.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterable, Iterator
from typing import Any
from uuid import UUID

import psycopg
from psycopg import sql
from psycopg.rows import tuple_row
from psycopg_pool import ConnectionPool

from actae.adapters.custody.pieces import BlobName, bounded, checked_rows, resolved
from actae.adapters.persistence.url import StoreUrl
from actae.domain.errors import NotFoundError

PENDING = "pending:"
"""Prefix of the name of a blob still being written (an artifact's name is hex)."""
READ_BATCH = 4
"""Chunk rows fetched per statement while reading: a few MiB in memory, few round trips."""


class PostgresTables:
    """The pool and the schema-qualified statements of the artifact tables."""

    def __init__(self, url: StoreUrl, pool: ConnectionPool[Any] | None = None) -> None:
        schema = url.postgres_schema

        def table(name: str) -> sql.Identifier:
            return sql.Identifier(schema, name)

        def statement(text: str) -> sql.Composed:
            return sql.SQL(text).format(
                artifacts=table("actae_artifacts"),
                chunks=table("actae_artifact_chunks"),
                refs=table("actae_artifact_refs"),
            )

        self.statement = statement
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


class PostgresBlobs:
    """Blobs in ``actae_artifacts`` and ``actae_artifact_chunks`` of a PostgreSQL schema."""

    def __init__(self, tables: PostgresTables) -> None:
        self.tables = tables
        s = tables.statement
        self._mark = s("INSERT INTO {artifacts} (name, blob, size) VALUES (%s, %s, 0)")
        self._chunk = s("INSERT INTO {chunks} (blob, seq, data) VALUES (%s, %s, %b)")
        self._name = s(
            "INSERT INTO {artifacts} (name, blob, size) VALUES (%s, %s, %s) "
            "ON CONFLICT (name) DO NOTHING"
        )
        self._unmark = s("DELETE FROM {artifacts} WHERE name = %s")
        self._drop_chunks = s("DELETE FROM {chunks} WHERE blob = ANY(%s)")
        self._has = s("SELECT 1 FROM {artifacts} WHERE name = %s")
        self._find = s("SELECT blob, size FROM {artifacts} WHERE name = %s")
        self._batch = s(
            "SELECT seq, data FROM {chunks} WHERE blob = %s AND seq >= %s ORDER BY seq LIMIT %s"
        )
        self._delete = s("DELETE FROM {artifacts} WHERE name = ANY(%s) RETURNING blob")
        self._stale = s(
            "DELETE FROM {artifacts} WHERE name LIKE 'pending:%%' "
            "AND created_at < now() - make_interval(secs => %s) RETURNING blob"
        )

    def put(self, name: BlobName, chunks: Iterable[bytes]) -> int:
        """Write the chunks as they come, then name the blob (or drop it: a duplicate)."""
        blob = uuid.uuid4()
        pending = PENDING + str(blob)
        pool = self.tables
        with pool.connection() as conn:
            conn.execute(self._mark, (pending, blob))
        try:
            size = 0
            for seq, piece in enumerate(bounded(chunks)):
                with pool.connection() as conn:
                    conn.execute(self._chunk, (blob, seq, piece))
                size += len(piece)
            final = resolved(name)
            with pool.connection() as conn, conn.transaction():
                inserted = conn.execute(self._name, (final, blob, size)).rowcount
                conn.execute(self._unmark, (pending,))
                if not inserted:
                    conn.execute(self._drop_chunks, ([blob],))
        except BaseException:
            # Best effort: if the database is what failed, the marker stays for sweep().
            with (
                contextlib.suppress(psycopg.Error),
                pool.connection() as conn,
                conn.transaction(),
            ):
                conn.execute(self._drop_chunks, ([blob],))
                conn.execute(self._unmark, (pending,))
            raise
        return size

    def has(self, name: str) -> bool:
        """Whether a blob of that name exists (complete: a named blob always is)."""
        with self.tables.connection() as conn:
            return conn.execute(self._has, (name,)).fetchone() is not None

    def open(self, name: str) -> Iterator[bytes]:
        """The blob's chunks in order; :class:`NotFoundError` at once when it is missing.

        Rows are fetched a few at a time as the iterator is read, each batch on whichever
        pooled connection is free. A gap in the sequence or a total other than the recorded
        size raises :class:`CorruptionError` (so does a blob deleted while it is read).
        """
        with self.tables.connection() as conn:
            row = conn.execute(self._find, (name,)).fetchone()
        if row is None:
            raise NotFoundError("blob", name)
        blob, size = row
        return checked_rows(name, int(size), lambda seq: self._fetch(blob, seq))

    def _fetch(self, blob: UUID, start: int) -> list[tuple[int, bytes]]:
        with self.tables.connection() as conn:
            rows = conn.execute(self._batch, (blob, start, READ_BATCH), binary=True)
            return [(int(seq), bytes(data)) for seq, data in rows]

    def delete(self, names: Iterable[str]) -> int:
        """Delete these blobs and their chunks; how many existed."""
        with self.tables.connection() as conn, conn.transaction():
            blobs = [blob for (blob,) in conn.execute(self._delete, (list(names),))]
            conn.execute(self._drop_chunks, (blobs,))
        return len(blobs)

    def sweep(self, older_than: float) -> int:
        """Remove the chunks of writes that a crash interrupted ``older_than`` seconds ago."""
        with self.tables.connection() as conn, conn.transaction():
            blobs = [blob for (blob,) in conn.execute(self._stale, (float(older_than),))]
            conn.execute(self._drop_chunks, (blobs,))
        return len(blobs)

    def close(self) -> None:
        """Close the pool (shared with the references of the same store, if any)."""
        self.tables.close()


class PostgresRefs:
    """Which runs reference which artifact names, in ``actae_artifact_refs``."""

    def __init__(self, tables: PostgresTables) -> None:
        self.tables = tables
        s = tables.statement
        self._add = s("INSERT INTO {refs} (name, run_id) VALUES (%s, %s) ON CONFLICT DO NOTHING")
        self._names = s("SELECT name FROM {refs} WHERE run_id = %s ORDER BY name")
        # The CTE's DELETE is invisible to the rest of the statement, hence run_id <> %s.
        self._drop = s(
            "WITH dropped AS (DELETE FROM {refs} WHERE run_id = %s RETURNING name) "
            "SELECT DISTINCT d.name FROM dropped d WHERE NOT EXISTS "
            "(SELECT 1 FROM {refs} r WHERE r.name = d.name AND r.run_id <> %s) ORDER BY d.name"
        )

    def add_ref(self, name: str, run_id: UUID) -> None:
        """Record that ``run_id`` references ``name`` (again: no change)."""
        with self.tables.connection() as conn:
            conn.execute(self._add, (name, run_id))

    def names_of(self, run_id: UUID) -> list[str]:
        """The names ``run_id`` references, sorted."""
        with self.tables.connection() as conn:
            return [name for (name,) in conn.execute(self._names, (run_id,))]

    def drop_refs(self, run_id: UUID) -> list[str]:
        """Forget ``run_id``'s references; the names no run references any more, sorted."""
        with self.tables.connection() as conn:
            return [name for (name,) in conn.execute(self._drop, (run_id, run_id))]

    def close(self) -> None:
        """Close the pool (shared with the blobs of the same store, if any)."""
        self.tables.close()
