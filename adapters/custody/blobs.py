"""Where artifact bytes live, by name: the store's database or a directory.

A blob store knows names and bytes, nothing about runs, keys or digests (the
:class:`~actae.adapters.custody.artifacts.Artifacts` above it decides and checks them). It
streams, and ``put`` is idempotent by name: the name stands for the content.

**In the database, each chunk is its own short statement:** one transaction per blob would
hold SQLite's write lock, or a PostgreSQL connection, while its source produces a gigabyte.
Chunks commit one by one under a fresh blob id, and one transaction names the blob at the
end (discarding the chunks when the name exists). A marker row ``pending:<blob>`` exists
meanwhile, so :meth:`DatabaseBlobs.sweep` can remove what a crash leaves.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from urllib.parse import unquote, urlsplit

from actae.adapters.custody.chunks import BlobName
from actae.adapters.custody.files import FileBlobs
from actae.adapters.custody.tables import Tables
from actae.domain.errors import CorruptionError, NotFoundError, ValidationError

PENDING = "pending:"
"""Prefix of the name of a blob still being written (an artifact's name is hex)."""
READ_BATCH = 4
"""Chunk rows fetched per statement while reading: a few MiB in memory, few round trips."""


class DatabaseBlobs:
    """Blobs in ``actae_artifacts`` and ``actae_artifact_chunks`` of the store's database."""

    def __init__(self, tables: Tables) -> None:
        self.tables = tables

    def put(self, name: BlobName, chunks: Iterable[bytes]) -> int:
        """Write the chunks as they come, then name the blob (or drop it: a duplicate)."""
        blob = str(uuid.uuid4())
        pending = PENDING + blob
        tables, run = self.tables, self.tables.run
        insert = "INSERT INTO {p}actae_artifacts (name, blob, size) VALUES (?, ?, ?)"
        chunk = "INSERT INTO {p}actae_artifact_chunks (blob, seq, data) VALUES (?, ?, ?)"
        with tables.connection() as conn:
            run(conn, insert, pending, blob, 0)
        try:
            size = 0
            for seq, piece in enumerate(chunks):
                with tables.connection() as conn:
                    run(conn, chunk, blob, seq, piece)
                size += len(piece)
            final = name()
            with tables.transaction() as conn:
                named = run(conn, insert + " ON CONFLICT (name) DO NOTHING", final, blob, size)
                self._forget(conn, pending, [] if named.rowcount else [blob])
        except BaseException:
            # Best effort: if the database is what failed, the marker stays for sweep().
            with contextlib.suppress(Exception), tables.transaction() as conn:
                self._forget(conn, pending, [blob])
            raise
        return size

    def has(self, name: str) -> bool:
        """Whether a blob of that name exists (complete: a named blob always is)."""
        return self._find(name) is not None

    def _find(self, name: str) -> tuple[Any, int] | None:
        with self.tables.connection() as conn:
            sql = "SELECT blob, size FROM {p}actae_artifacts WHERE name = ?"
            row = self.tables.run(conn, sql, name).fetchone()
        return None if row is None else (row[0], int(row[1]))

    def open(self, name: str) -> Iterator[bytes]:
        """The blob's chunks in order; :class:`NotFoundError` at once when it is missing.

        Rows are fetched a few at a time, each batch on a connection of its own.
        """
        found = self._find(name)
        if found is None:
            raise NotFoundError("blob", name)
        blob, size = found
        return checked_rows(name, size, lambda seq: self._fetch(blob, seq))

    def _fetch(self, blob: Any, start: int) -> list[tuple[int, bytes]]:
        sql = "SELECT seq, data FROM {p}actae_artifact_chunks WHERE blob = ? AND seq >= ? "
        with self.tables.connection() as conn:
            rows = self.tables.run(conn, sql + "ORDER BY seq LIMIT ?", blob, start, READ_BATCH)
            return [(int(seq), bytes(data)) for seq, data in rows]

    def delete(self, names: Iterable[str]) -> int:
        """Delete these blobs and their chunks; how many existed."""
        sql = "DELETE FROM {p}actae_artifacts WHERE name = ? RETURNING blob"
        with self.tables.transaction() as conn:
            found = [self.tables.run(conn, sql, name).fetchall() for name in names]
            return self._forget(conn, None, [blob for rows in found for (blob,) in rows])

    def sweep(self, older_than: float) -> int:
        """Remove the chunks of writes that a crash interrupted ``older_than`` seconds ago."""
        sql = (
            "DELETE FROM {p}actae_artifacts WHERE name LIKE 'pending:%' "
            "AND created_at < {older_than} RETURNING blob"
        )
        with self.tables.transaction() as conn:
            stale = self.tables.run(conn, sql, float(older_than)).fetchall()
            return self._forget(conn, None, [blob for (blob,) in stale])

    def _forget(self, conn: Any, pending: str | None, blobs: list[Any]) -> int:
        """Delete the chunks of ``blobs`` and the ``pending`` marker; how many blobs."""
        run = self.tables.run
        for blob in blobs:
            run(conn, "DELETE FROM {p}actae_artifact_chunks WHERE blob = ?", blob)
        if pending is not None:
            run(conn, "DELETE FROM {p}actae_artifacts WHERE name = ?", pending)
        return len(blobs)


BlobStore = DatabaseBlobs | FileBlobs
"""Bytes by name, streamed both ways; ``put`` discards bytes whose name exists already."""


def checked_rows(
    name: str, size: int, fetch: Callable[[int], list[tuple[int, bytes]]]
) -> Iterator[bytes]:
    """A database blob's chunks from ``fetch(first_seq)`` batches, checked as they come.

    The rows must number 0, 1, 2, ... and add up to ``size``: a missing or added row is
    reported before a reader gets bytes it would only find wrong at the end.
    """
    seq, total = 0, 0
    while batch := fetch(seq):
        for found, data in batch:
            if found != seq:
                raise CorruptionError(f"blob {name}", f"chunk {seq} is missing")
            total += len(data)
            if total > size:
                raise CorruptionError(f"blob {name}", f"more than its {size} bytes are stored")
            seq += 1
            yield data
    if total != size:
        raise CorruptionError(f"blob {name}", f"{total} of its {size} bytes are stored")


def blob_store(spec: str | None, tables: Tables) -> BlobStore:
    """The blob store ``spec`` names: ``None``, the store's database; ``file:///abs/path``."""
    if spec is None:
        return DatabaseBlobs(tables)
    if not isinstance(spec, str):
        raise ValidationError("url.artifacts", f"expected a string, got {type(spec).__name__}")
    parts = urlsplit(spec)
    scheme = parts.scheme.lower()
    if scheme == "file":
        if parts.netloc not in ("", "localhost") or parts.query or parts.fragment:
            raise ValidationError("url.artifacts", f"expected file:///absolute/path, got {spec!r}")
        return FileBlobs(unquote(parts.path))
    if scheme in ("s3", "gs", "gcs", "az", "azure"):
        raise ValidationError(
            "url.artifacts",
            f"{scheme}:// is not supported yet; keep artifacts in the store's database "
            "(leave it unset) or in a directory (file:///absolute/path)",
        )
    raise ValidationError(
        "url.artifacts",
        f"unknown scheme in {spec!r}; leave it unset to keep artifacts in the store's "
        "database, or use file:///absolute/path",
    )
