"""Artifacts in the store's SQLite database: blobs in chunk rows, and the runs' references.

**Each chunk is its own short transaction.** SQLite has one writer at a time; a blob written
in one transaction would hold the file's write lock for as long as its source takes to
produce a gigabyte, and every transition of every run would wait behind it (and time out
after 30 s). So chunks commit one by one under a fresh blob id, and the blob gets its name
at the end, in one transaction that also discards the new chunks when the name exists
already (the content is stored once). A marker row ``pending:<blob>`` exists while the
chunks are written: what a crash leaves behind is then recognisable, and
:meth:`SQLiteBlobs.sweep` removes it once it is older than any write could take.

Connections are opened per call (per stream for a read) and closed after: opening a SQLite
connection costs microseconds, and no connection is then shared between threads.
"""

from __future__ import annotations

import contextlib
import sqlite3
import uuid
from collections.abc import Iterable, Iterator
from uuid import UUID

from actae.adapters.custody.pieces import BlobName, bounded, checked_rows, resolved
from actae.domain.errors import NotFoundError

PENDING = "pending:"
"""Prefix of the name of a blob still being written (an artifact's name is hex)."""
LOCK_TIMEOUT = 30
READ_BATCH = 4
"""Chunk rows fetched per query while reading: a few MiB in memory, few round trips."""


class SQLiteTables:
    """Connections to the store's SQLite database, in autocommit mode (transactions explicit).

    ``database`` is a path, or the URI of an in-memory database that every connection of
    this process shares by name.
    """

    def __init__(self, database: str) -> None:
        self.database = database

    @contextlib.contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        """A fresh connection, closed on exit."""
        conn = sqlite3.connect(self.database, uri=True, timeout=LOCK_TIMEOUT, isolation_level=None)
        try:
            yield conn
        finally:
            conn.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A connection inside ``BEGIN IMMEDIATE``: committed on exit, rolled back on error."""
        with self.connection() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")


class SQLiteBlobs:
    """Blobs in ``actae_artifacts`` and ``actae_artifact_chunks`` of a SQLite store."""

    def __init__(self, tables: SQLiteTables) -> None:
        self.tables = tables

    def put(self, name: BlobName, chunks: Iterable[bytes]) -> int:
        """Write the chunks as they come, then name the blob (or drop it: a duplicate)."""
        blob = str(uuid.uuid4())
        pending = PENDING + blob
        with self.tables.connection() as conn:
            conn.execute(
                "INSERT INTO actae_artifacts (name, blob, size) VALUES (?, ?, 0)", (pending, blob)
            )
            try:
                size = 0
                for seq, piece in enumerate(bounded(chunks)):
                    conn.execute(
                        "INSERT INTO actae_artifact_chunks (blob, seq, data) VALUES (?, ?, ?)",
                        (blob, seq, piece),
                    )
                    size += len(piece)
                final = resolved(name)
                conn.execute("BEGIN IMMEDIATE")
                inserted = conn.execute(
                    "INSERT INTO actae_artifacts (name, blob, size) VALUES (?, ?, ?) "
                    "ON CONFLICT (name) DO NOTHING",
                    (final, blob, size),
                ).rowcount
                conn.execute("DELETE FROM actae_artifacts WHERE name = ?", (pending,))
                if not inserted:
                    conn.execute("DELETE FROM actae_artifact_chunks WHERE blob = ?", (blob,))
                conn.execute("COMMIT")
            except BaseException:
                # Best effort: if the file is what failed, the marker stays for sweep().
                with contextlib.suppress(sqlite3.Error):
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    _discard(conn, [(blob, pending)])
                raise
        return size

    def has(self, name: str) -> bool:
        """Whether a blob of that name exists (complete: a named blob always is)."""
        with self.tables.connection() as conn:
            row = conn.execute("SELECT 1 FROM actae_artifacts WHERE name = ?", (name,))
            return row.fetchone() is not None

    def open(self, name: str) -> Iterator[bytes]:
        """The blob's chunks in order; :class:`NotFoundError` at once when it is missing.

        Rows are fetched a few at a time as the iterator is read. A gap in the sequence or a
        total other than the recorded size raises :class:`CorruptionError`.
        """
        with self.tables.connection() as conn:
            row = conn.execute(
                "SELECT blob, size FROM actae_artifacts WHERE name = ?", (name,)
            ).fetchone()
        if row is None:
            raise NotFoundError("blob", name)
        return self._stream(name, row[0], row[1])

    def _stream(self, name: str, blob: str, size: int) -> Iterator[bytes]:
        with self.tables.connection() as conn:
            yield from checked_rows(name, size, lambda seq: _batch(conn, blob, seq))

    def delete(self, names: Iterable[str]) -> int:
        """Delete these blobs and their chunks; how many existed."""
        with self.tables.transaction() as conn:
            found = [
                (row[0], name)
                for name in names
                for row in conn.execute(
                    "SELECT blob FROM actae_artifacts WHERE name = ?", (name,)
                ).fetchall()
            ]
            _discard(conn, found)
        return len(found)

    def sweep(self, older_than: float) -> int:
        """Remove the chunks of writes that a crash interrupted ``older_than`` seconds ago."""
        with self.tables.transaction() as conn:
            stale = conn.execute(
                "SELECT blob, name FROM actae_artifacts WHERE name LIKE 'pending:%' "
                "AND created_at < datetime('now', ?)",
                (f"-{float(older_than)} seconds",),
            ).fetchall()
            _discard(conn, stale)
        return len(stale)

    def close(self) -> None:
        """Nothing to release: every call opens and closes its own connection."""


def _batch(conn: sqlite3.Connection, blob: str, start: int) -> list[tuple[int, bytes]]:
    rows = conn.execute(
        "SELECT seq, data FROM actae_artifact_chunks WHERE blob = ? AND seq >= ? "
        "ORDER BY seq LIMIT ?",
        (blob, start, READ_BATCH),
    )
    return [(int(seq), bytes(data)) for seq, data in rows]


def _discard(conn: sqlite3.Connection, blobs: Iterable[tuple[str, str]]) -> None:
    for blob, name in blobs:
        conn.execute("DELETE FROM actae_artifact_chunks WHERE blob = ?", (blob,))
        conn.execute("DELETE FROM actae_artifacts WHERE name = ?", (name,))


class SQLiteRefs:
    """Which runs reference which artifact names, in ``actae_artifact_refs``."""

    def __init__(self, tables: SQLiteTables) -> None:
        self.tables = tables

    def add_ref(self, name: str, run_id: UUID) -> None:
        """Record that ``run_id`` references ``name`` (again: no change)."""
        with self.tables.connection() as conn:
            conn.execute(
                "INSERT INTO actae_artifact_refs (name, run_id) VALUES (?, ?) "
                "ON CONFLICT DO NOTHING",
                (name, str(run_id)),
            )

    def names_of(self, run_id: UUID) -> list[str]:
        """The names ``run_id`` references, sorted."""
        with self.tables.connection() as conn:
            rows = conn.execute(
                "SELECT name FROM actae_artifact_refs WHERE run_id = ? ORDER BY name",
                (str(run_id),),
            )
            return [name for (name,) in rows]

    def drop_refs(self, run_id: UUID) -> list[str]:
        """Forget ``run_id``'s references; the names no run references any more, sorted."""
        with self.tables.transaction() as conn:
            names = [
                name
                for (name,) in conn.execute(
                    "SELECT name FROM actae_artifact_refs WHERE run_id = ?", (str(run_id),)
                )
            ]
            conn.execute("DELETE FROM actae_artifact_refs WHERE run_id = ?", (str(run_id),))
            return sorted(
                name
                for name in names
                if conn.execute(
                    "SELECT 1 FROM actae_artifact_refs WHERE name = ? LIMIT 1", (name,)
                ).fetchone()
                is None
            )

    def close(self) -> None:
        """Nothing to release."""
