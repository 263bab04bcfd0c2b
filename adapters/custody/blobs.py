"""Where artifact bytes live, by name: the store's database, a directory, or memory.

A :class:`BlobStore` knows names and bytes, nothing about runs, keys or digests; the
:class:`~actae.adapters.custody.artifacts.Artifacts` above it decides names and checks what
comes back. Every backend streams: ``put`` consumes an iterable of chunks and ``open``
returns an iterator of chunks, so a gigabyte passes through a few megabytes of memory
(except in :class:`MemoryBlobs`, whose bytes are memory). ``put`` is idempotent by name:
the name stands for the content, so when it exists the new bytes are discarded.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from typing import Protocol
from urllib.parse import unquote, urlsplit

from actae.adapters.custody.files import FileBlobs
from actae.adapters.custody.pieces import BlobName, bounded, resolved
from actae.adapters.custody.postgres_tables import PostgresBlobs, PostgresTables
from actae.adapters.custody.sqlite_tables import SQLiteBlobs, SQLiteTables
from actae.adapters.persistence.url import StoreUrl
from actae.domain.errors import NotFoundError, ValidationError


class BlobStore(Protocol):
    """Bytes by name, streamed both ways."""

    def put(self, name: BlobName, chunks: Iterable[bytes]) -> int:
        """Store the chunks under ``name`` (resolved after the last chunk); their size.

        If ``name`` exists, the new bytes are discarded: nothing is stored twice.
        """
        ...

    def has(self, name: str) -> bool:
        """Whether a complete blob of that name exists."""
        ...

    def open(self, name: str) -> Iterator[bytes]:
        """Its chunks, read as the iterator is; :class:`NotFoundError` at once if missing."""
        ...

    def delete(self, names: Iterable[str]) -> int:
        """Delete these blobs (missing ones are skipped); how many were deleted."""
        ...

    def sweep(self, older_than: float) -> int:
        """Remove what writes interrupted by a crash at least ``older_than`` s ago left."""
        ...

    def close(self) -> None:
        """Release connections; the store is not used after."""
        ...


class MemoryBlobs:
    """Blobs in a dict, for ``memory://`` stores (whose every byte is memory anyway)."""

    def __init__(self) -> None:
        self._blobs: dict[str, tuple[bytes, ...]] = {}
        self._lock = threading.Lock()

    def put(self, name: BlobName, chunks: Iterable[bytes]) -> int:
        """Keep the chunks under ``name`` unless it is taken; their size."""
        pieces = tuple(bounded(chunks))
        with self._lock:
            self._blobs.setdefault(resolved(name), pieces)
        return sum(map(len, pieces))

    def has(self, name: str) -> bool:
        """Whether the blob exists."""
        return name in self._blobs

    def open(self, name: str) -> Iterator[bytes]:
        """The blob's chunks; :class:`NotFoundError` if missing."""
        try:
            return iter(self._blobs[name])
        except KeyError:
            raise NotFoundError("blob", name) from None

    def delete(self, names: Iterable[str]) -> int:
        """Forget these blobs; how many existed."""
        with self._lock:
            return sum(self._blobs.pop(name, None) is not None for name in set(names))

    def sweep(self, older_than: float) -> int:
        """Nothing to sweep: a crash takes the whole store with it."""
        return 0

    def close(self) -> None:
        """Nothing to release."""


def blob_store(spec: str | None, url: StoreUrl, tables: PostgresTables | None = None) -> BlobStore:
    """The blob store that ``spec`` names, for the store at ``url``.

    ``None`` keeps the bytes in the store's own database (in memory for ``memory://`` and an
    in-memory SQLite file, whose tables no second connection could see); ``file:///abs/path``
    puts them in that directory. ``tables`` shares an existing PostgreSQL pool.
    """
    if spec is not None:
        return _elsewhere(spec)
    if url.backend == "postgresql":
        return PostgresBlobs(tables or PostgresTables(url))
    if url.backend == "sqlite" and not in_memory(url):
        return SQLiteBlobs(SQLiteTables(url.sqlite_path or ""))
    return MemoryBlobs()


def in_memory(url: StoreUrl) -> bool:
    """Whether a SQLite URL names an in-memory database (each connection gets its own)."""
    path = url.sqlite_path or ""
    return path.startswith(":memory:") or "mode=memory" in path


def _elsewhere(spec: str) -> BlobStore:
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
