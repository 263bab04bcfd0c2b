"""Which runs reference which artifacts: recorded in the store's database, always.

Blobs may live elsewhere (a directory), but who references them is the store's business:
retention asks it which names a purged run leaves unreferenced, and only those blobs go.
A name can be referenced by many runs (clear artifacts are named by their digest, so equal
content is stored once across runs), and a blob is deleted only when none is left.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol
from uuid import UUID

from actae.adapters.custody.blobs import BlobStore, blob_store, in_memory
from actae.adapters.custody.postgres_tables import PostgresRefs, PostgresTables
from actae.adapters.custody.sqlite_tables import SQLiteRefs, SQLiteTables
from actae.adapters.persistence.url import StoreUrl


class RefRecorder(Protocol):
    """The (name, run) pairs of artifact references."""

    def add_ref(self, name: str, run_id: UUID) -> None:
        """Record that ``run_id`` references ``name`` (again: no change)."""
        ...

    def names_of(self, run_id: UUID) -> list[str]:
        """The names ``run_id`` references, sorted."""
        ...

    def drop_refs(self, run_id: UUID) -> list[str]:
        """Forget ``run_id``'s references; the names no run references any more, sorted."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...


class MemoryRefs:
    """References in a dict, for stores in memory."""

    def __init__(self) -> None:
        self._runs: dict[str, set[UUID]] = {}
        self._lock = threading.Lock()

    def add_ref(self, name: str, run_id: UUID) -> None:
        """Record that ``run_id`` references ``name``."""
        with self._lock:
            self._runs.setdefault(name, set()).add(run_id)

    def names_of(self, run_id: UUID) -> list[str]:
        """The names ``run_id`` references, sorted."""
        with self._lock:
            return sorted(name for name, runs in self._runs.items() if run_id in runs)

    def drop_refs(self, run_id: UUID) -> list[str]:
        """Forget ``run_id``'s references; the names no run references any more, sorted."""
        unreferenced = []
        with self._lock:
            for name, runs in list(self._runs.items()):
                if run_id in runs:
                    runs.discard(run_id)
                    if not runs:
                        del self._runs[name]
                        unreferenced.append(name)
        return sorted(unreferenced)

    def close(self) -> None:
        """Nothing to release."""


def ref_recorder(url: StoreUrl, tables: PostgresTables | None = None) -> RefRecorder:
    """The references of the store at ``url`` (``tables`` shares a PostgreSQL pool)."""
    if url.backend == "postgresql":
        return PostgresRefs(tables or PostgresTables(url))
    if url.backend == "sqlite" and not in_memory(url):
        return SQLiteRefs(SQLiteTables(url.sqlite_path or ""))
    return MemoryRefs()


def custody_backends(
    spec: str | None, url: StoreUrl, pool: Any = None
) -> tuple[BlobStore, RefRecorder]:
    """The blob store ``spec`` names and the references, sharing one PostgreSQL pool."""
    tables = PostgresTables(url, pool) if url.backend == "postgresql" else None
    try:
        return blob_store(spec, url, tables), ref_recorder(url, tables)
    except BaseException:
        if tables is not None:
            tables.close()
        raise
