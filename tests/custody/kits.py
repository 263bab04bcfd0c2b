"""Artifacts on each blob backend, with a handle on the stored bytes for tampering.

Helpers of test_artifacts.py (which declares the fixtures over them).

Every store is opened with ``actae.open`` (which runs the migrations that make the artifact
tables) and stays open for the test (a ``memory://`` store's database lives as long); the
artifacts are then built by the store's backend, as the store itself builds them. ``file``
keeps the bytes in a directory and the references in a SQLite store.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

import actae
from actae.adapters.custody.artifacts import Artifacts, RefKeys
from actae.adapters.custody.blobs import blob_store
from actae.adapters.custody.files import FileBlobs
from actae.adapters.custody.refs import RefRecorder
from actae.adapters.persistence.url import parse_store_url

KEYS = RefKeys("k1", {"k1": bytes(range(32)), "k0": bytes(range(1, 33))})
BLOB_BACKENDS = [
    "memory",
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
    "file",
]


@dataclass
class Kit:
    """Artifacts on one backend, and what a test needs to reach under them."""

    backend: str
    url: str
    artifacts: Artifacts
    count: Callable[[], int]
    """How many blobs are stored (rows of actae_artifacts, or files)."""
    chunks: Callable[[str], list[bytes]]
    """The stored chunks of a blob, in order."""
    rewrite: Callable[[str, list[bytes]], None]
    """Replace a blob's stored chunks (and its recorded size) with these."""
    sql: Callable[..., list[Any]] | None = None
    """Run a statement on the store's database (``%s`` placeholders); None off a database."""


def _sql(conninfo: dict[str, str], schema: str, query: str, *params: Any) -> list[Any]:
    with psycopg.connect(**conninfo, autocommit=True) as conn:  # type: ignore[arg-type]
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        cursor = conn.execute(query.encode(), params, binary=True)
        return cursor.fetchall() if cursor.description else []


def _lite(database: str, query: str, *params: Any) -> list[Any]:
    conn = sqlite3.connect(database, uri=True)
    try:
        with conn:
            return conn.execute(query, params).fetchall()
    finally:
        conn.close()


def _database_kit(backend: str, store: actae.Store, artifacts: Artifacts) -> Kit:
    url = store.url
    parsed = parse_store_url(url)
    if backend == "postgres":

        def run(query: str, *params: Any) -> list[Any]:
            return _sql(parsed.postgres_conninfo, parsed.postgres_schema, query, *params)

    else:

        def run(query: str, *params: Any) -> list[Any]:
            database = store._backend.database  # type: ignore[attr-defined]
            return _lite(database, query.replace("%s", "?"), *params)

    def blob_of(name: str) -> Any:
        return run("SELECT blob FROM actae_artifacts WHERE name = %s", name)[0][0]

    def chunks(name: str) -> list[bytes]:
        rows = run(
            "SELECT data FROM actae_artifact_chunks WHERE blob = %s ORDER BY seq", blob_of(name)
        )
        return [bytes(data) for (data,) in rows]

    def rewrite(name: str, pieces: list[bytes]) -> None:
        blob = blob_of(name)
        run("DELETE FROM actae_artifact_chunks WHERE blob = %s", blob)
        for seq, piece in enumerate(pieces):
            run(
                "INSERT INTO actae_artifact_chunks (blob, seq, data) VALUES (%s, %s, %s)",
                blob,
                seq,
                piece,
            )
        run("UPDATE actae_artifacts SET size = %s WHERE name = %s", sum(map(len, pieces)), name)

    def count() -> int:
        return int(run("SELECT count(*) FROM actae_artifacts")[0][0])

    return Kit(backend, url, artifacts, count, chunks, rewrite, run)


def _file_kit(url: str, artifacts: Artifacts) -> Kit:
    blobs = artifacts.blobs
    assert isinstance(blobs, FileBlobs)

    def chunks(name: str) -> list[bytes]:
        return [Path(blobs.path(name)).read_bytes()]

    def rewrite(name: str, pieces: list[bytes]) -> None:
        Path(blobs.path(name)).write_bytes(b"".join(pieces))

    def count() -> int:
        return sum(path.is_file() for path in Path(blobs.root).glob("*/*/*"))

    return Kit("file", url, artifacts, count, chunks, rewrite)


def make_kit(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Kit]:
    """Artifacts on ``backend`` in a new store, closed when the generator is."""
    if backend == "memory":
        url = "memory://"
    elif backend == "postgres":
        url = request.getfixturevalue("pg_url")
    else:
        url = f"sqlite:///{tmp_path / 'runs.db'}"
    with actae.open(url) as store:
        spec = f"file://{tmp_path / 'blobs'}" if backend == "file" else None
        tables = store._backend.tables()
        artifacts = Artifacts(blob_store(spec, tables), RefRecorder(tables), KEYS)
        if backend == "file":
            yield _file_kit(url, artifacts)
        else:
            yield _database_kit(backend, store, artifacts)
