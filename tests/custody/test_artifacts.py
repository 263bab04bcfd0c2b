"""Artifacts: round trips, deduplication, references, and every kind of tampering refused.

Each test runs on every blob backend (memory, SQLite, PostgreSQL, a directory) through the
``kit`` fixture (conftest.py), which also reaches under the store to change stored bytes.
"""

from __future__ import annotations

import hashlib
import io
import os
import random
import sqlite3
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

import actae
from actae.adapters.custody.artifacts import Artifacts, RefKeys
from actae.adapters.custody.blobs import DatabaseBlobs, blob_store
from actae.adapters.custody.chunks import CHUNK_SIZE, SEALED_CHUNK
from actae.adapters.custody.files import FileBlobs
from actae.adapters.custody.refs import RefRecorder
from actae.adapters.custody.tables import SQLiteTables
from actae.adapters.persistence.url import parse_store_url
from actae.domain.artifacts import ArtifactRef
from actae.domain.errors import CorruptionError, ValidationError
from tests.custody.kits import BLOB_BACKENDS, KEYS, Kit, make_kit

RUN_A = uuid.UUID("00000000-0000-4000-8000-00000000000a")
RUN_B = uuid.UUID("00000000-0000-4000-8000-00000000000b")
KEY_A = bytes([7]) * 32
KEY_B = bytes([9]) * 32
BINARY = "application/octet-stream"
MULTI = 2 * CHUNK_SIZE + 7
"""Three chunks, the last a short one."""


@pytest.fixture(params=BLOB_BACKENDS)
def kit(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Kit]:
    """Artifacts on each blob backend, closed after the test."""
    yield from make_kit(request.param, request, tmp_path)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_kit(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Kit]:
    """Artifacts whose bytes are rows of the store's database (``sql`` is set)."""
    yield from make_kit(request.param, request, tmp_path)


def payload(size: int, seed: int = 0) -> bytes:
    return random.Random(seed).randbytes(size)  # noqa: S311 - test content, not a secret


class Trickle(io.RawIOBase):
    """A file whose reads return at most 100 kB, like a pipe or a socket."""

    def __init__(self, data: bytes) -> None:
        super().__init__()
        self._data = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1, /) -> bytes:
        return self._data.read(min(size, 100_000) if size >= 0 else 100_000)


def read_all(kit: Kit, ref: ArtifactRef, key: bytes | None) -> bytes:
    with kit.artifacts.open(ref, data_key=key) as stream:
        return b"".join(iter(lambda: stream.read(300_000), b""))


def refused(kit: Kit, ref: ArtifactRef, key: bytes | None) -> bool:
    try:
        read_all(kit, ref, key)
    except CorruptionError:
        return True
    return False


def stored_pieces(kit: Kit, name: str, sealed: bool) -> list[bytes]:
    """The blob cut at chunk boundaries, whatever the backend stores per row or file."""
    whole = b"".join(kit.chunks(name))
    step = SEALED_CHUNK if sealed else CHUNK_SIZE
    return [whole[i : i + step] for i in range(0, len(whole), step)]


def test_round_trips_clear_and_sealed_from_every_kind_of_source(kit: Kit, tmp_path: Path) -> None:
    sizes = (0, 1000, 2 * CHUNK_SIZE, MULTI)
    for size in sizes:
        data = payload(size, size)
        path = tmp_path / "source.bin"
        path.write_bytes(data)
        for key in (None, KEY_A):
            for source in (data, memoryview(data), io.BytesIO(data), Trickle(data), path):
                ref = kit.artifacts.put(RUN_A, source, media_type=BINARY, data_key=key)
                assert ref.digest == hashlib.sha256(data).hexdigest()
                assert (ref.size, ref.sealed, ref.key) == (size, key is not None, "k1")
                assert read_all(kit, ref, key) == data
                assert kit.artifacts.read(ref, data_key=key) == data
    # Five sources of one content and key make one blob: 4 clear and 4 sealed in all.
    assert kit.count() == 2 * len(sizes)


def test_equal_content_is_stored_once_per_name(kit: Kit, monkeypatch: pytest.MonkeyPatch) -> None:
    data = payload(CHUNK_SIZE + 1)
    in_a = kit.artifacts.put(RUN_A, data, media_type=BINARY, data_key=None)
    writes: list[object] = []
    blobs_put = kit.artifacts.blobs.put

    def counted_put(*args: Any) -> int:
        writes.append(args)
        return blobs_put(*args)

    monkeypatch.setattr(kit.artifacts.blobs, "put", counted_put)
    in_b = kit.artifacts.put(RUN_B, data, media_type="text/plain", data_key=None)
    assert writes == []  # bytes in memory: their name is looked up before any chunk is written
    assert kit.count() == 1  # clear: named by the digest, shared across runs
    if kit.sql is not None:
        assert kit.sql("SELECT count(*) FROM actae_artifact_chunks")[0][0] == 2
    assert kit.artifacts.refs.names_of(RUN_A) == kit.artifacts.refs.names_of(RUN_B) == [in_a.digest]
    assert read_all(kit, in_b, None) == data

    sealed = kit.artifacts.put(RUN_A, data, media_type=BINARY, data_key=KEY_A)
    again = kit.artifacts.put(RUN_A, io.BytesIO(data), media_type=BINARY, data_key=KEY_A)
    assert kit.count() == 2  # sealed: once per run, under a name that hides the digest
    if kit.sql is not None:  # the second sealed write's chunks were dropped, not left behind
        assert kit.sql("SELECT count(*) FROM actae_artifact_chunks")[0][0] == 4
    name = kit.artifacts.name_of(sealed, KEY_A)
    assert name != sealed.digest
    assert kit.artifacts.refs.names_of(RUN_A) == sorted([in_a.digest, name])
    assert read_all(kit, again, KEY_A) == data

    kit.artifacts.put(RUN_B, data, media_type=BINARY, data_key=KEY_B)
    assert kit.count() == 3


def test_purge_deletes_only_the_blobs_no_run_references(kit: Kit) -> None:
    shared = payload(5000, 1)
    kit.artifacts.put(RUN_A, shared, media_type=BINARY, data_key=None)
    in_b = kit.artifacts.put(RUN_B, shared, media_type=BINARY, data_key=None)
    kit.artifacts.put(RUN_A, payload(5000, 2), media_type=BINARY, data_key=KEY_A)
    assert kit.count() == 2

    assert kit.artifacts.purge(RUN_A) == 1  # its sealed blob; the shared one stays for B
    assert kit.artifacts.refs.names_of(RUN_A) == []
    assert read_all(kit, in_b, None) == shared
    assert kit.artifacts.refs.drop_refs(RUN_A) == []

    assert kit.artifacts.refs.drop_refs(RUN_B) == [in_b.digest]
    assert kit.artifacts.blobs.delete([in_b.digest, "0" * 64]) == 1
    assert kit.count() == 0


@pytest.mark.parametrize("sealed", [False, True], ids=["clear", "sealed"])
def test_a_flipped_byte_is_refused(kit: Kit, sealed: bool) -> None:
    key = KEY_A if sealed else None
    ref = kit.artifacts.put(RUN_A, payload(MULTI), media_type=BINARY, data_key=key)
    name = kit.artifacts.name_of(ref, key)
    pieces = stored_pieces(kit, name, sealed)
    first = bytearray(pieces[0])
    first[100] ^= 1
    kit.rewrite(name, [bytes(first), *pieces[1:]])

    with kit.artifacts.open(ref, data_key=key) as stream:
        if sealed:  # each chunk is checked before it is released
            with pytest.raises(CorruptionError, match="chunk 0 failed authentication"):
                stream.read(10)
        else:  # clear bytes are checked at the end, before end of file is reported
            assert len(stream.read(2 * CHUNK_SIZE)) == 2 * CHUNK_SIZE
            with pytest.raises(CorruptionError, match="hash to"):
                stream.read()


@pytest.mark.parametrize("sealed", [False, True], ids=["clear", "sealed"])
def test_missing_extra_or_reordered_chunks_are_refused(kit: Kit, sealed: bool) -> None:
    key = KEY_A if sealed else None
    ref = kit.artifacts.put(RUN_A, payload(MULTI), media_type=BINARY, data_key=key)
    name = kit.artifacts.name_of(ref, key)
    first, middle, last = stored_pieces(kit, name, sealed)
    changes = {
        "dropped": [first, last],
        "truncated": [first, middle],
        "extended": [first, middle, last, last],
        "swapped": [middle, first, last],
        "emptied": [],
    }
    for change, pieces in changes.items():
        kit.rewrite(name, pieces)
        assert refused(kit, ref, key), change
    kit.rewrite(name, [first, middle, last])
    assert read_all(kit, ref, key) == payload(MULTI)


def test_a_gap_in_the_chunk_rows_is_reported_by_number(db_kit: Kit) -> None:
    kit = db_kit
    assert kit.sql is not None
    ref = kit.artifacts.put(RUN_A, payload(MULTI), media_type=BINARY, data_key=None)
    (blob,) = kit.sql("SELECT blob FROM actae_artifacts WHERE name = %s", ref.digest)[0]
    kit.sql("DELETE FROM actae_artifact_chunks WHERE blob = %s AND seq = 1", blob)
    with pytest.raises(CorruptionError, match="chunk 1 is missing"):
        read_all(kit, ref, None)


def test_a_sealed_blob_is_bound_to_its_run_and_its_content(kit: Kit) -> None:
    data = payload(5000, 3)
    in_a = kit.artifacts.put(RUN_A, data, media_type=BINARY, data_key=KEY_A)
    with pytest.raises(CorruptionError, match="missing \\(or the data key"):
        kit.artifacts.open(in_a, data_key=KEY_B)  # another run's key names no blob

    # Even under one shared key, A's chunks copied into B's blob do not open as B's.
    in_b = kit.artifacts.put(RUN_B, data, media_type=BINARY, data_key=KEY_A)
    a_name, b_name = kit.artifacts.name_of(in_a, KEY_A), kit.artifacts.name_of(in_b, KEY_A)
    assert a_name != b_name
    kit.rewrite(b_name, kit.chunks(a_name))
    with pytest.raises(CorruptionError, match="last chunk 0 failed authentication"):
        read_all(kit, in_b, KEY_A)

    # Another artifact of the same run, same size, put in its place: refused at its last chunk.
    other = kit.artifacts.put(RUN_A, payload(5000, 4), media_type=BINARY, data_key=KEY_A)
    kit.rewrite(kit.artifacts.name_of(other, KEY_A), kit.chunks(a_name))
    with pytest.raises(CorruptionError, match="last chunk 0 failed authentication"):
        read_all(kit, other, KEY_A)


def test_a_missing_blob_is_refused_on_open(kit: Kit) -> None:
    ref = kit.artifacts.put(RUN_A, b"gone soon", media_type="text/plain", data_key=None)
    kit.artifacts.blobs.delete([ref.digest])
    with pytest.raises(CorruptionError, match="its bytes are missing"):
        kit.artifacts.open(ref, data_key=None)


def test_a_failed_source_leaves_nothing_behind(kit: Kit) -> None:
    class Failing(io.RawIOBase):
        def __init__(self) -> None:
            super().__init__()
            self.sent = 0

        def read(self, size: int = -1, /) -> bytes:
            if self.sent >= 2 * CHUNK_SIZE:
                raise OSError("connection reset")
            self.sent += size
            return bytes(size)

    for key in (None, KEY_A):
        with pytest.raises(OSError, match="connection reset"):
            kit.artifacts.put(RUN_A, Failing(), media_type=BINARY, data_key=key)
    assert kit.count() == 0
    assert kit.artifacts.refs.names_of(RUN_A) == []
    if kit.sql is not None:
        assert kit.sql("SELECT count(*) FROM actae_artifact_chunks")[0][0] == 0
    blobs = kit.artifacts.blobs
    if isinstance(blobs, FileBlobs):
        assert os.listdir(os.path.join(blobs.root, ".incoming")) == []


def test_sweep_removes_what_an_interrupted_write_left(kit: Kit) -> None:
    blobs = kit.artifacts.blobs
    if kit.sql is not None:
        old, fresh = uuid.uuid4(), uuid.uuid4()
        stamp = "%Y-%m-%d %H:%M:%S" + ("" if kit.backend != "postgres" else "+00")
        for blob, age in ((old, 7200), (fresh, 0)):
            kit.sql(
                "INSERT INTO actae_artifacts (name, blob, size, created_at) VALUES (%s, %s, 0, %s)",
                f"pending:{blob}",
                str(blob) if kit.backend != "postgres" else blob,
                time.strftime(stamp, time.gmtime(time.time() - age)),
            )
            kit.sql(
                "INSERT INTO actae_artifact_chunks (blob, seq, data) VALUES (%s, 0, %s)",
                str(blob) if kit.backend != "postgres" else blob,
                b"partial",
            )
        assert blobs.sweep(3600) == 1
        assert kit.sql("SELECT count(*) FROM actae_artifact_chunks")[0][0] == 1
    elif isinstance(blobs, FileBlobs):
        incoming = Path(blobs.root, ".incoming")
        (incoming / "blob-old").write_bytes(b"partial")
        (incoming / "blob-new").write_bytes(b"partial")
        os.utime(incoming / "blob-old", (time.time() - 7200,) * 2)
        assert blobs.sweep(3600) == 1
        assert os.listdir(incoming) == ["blob-new"]
    else:
        assert blobs.sweep(0) == 0


@pytest.fixture
def artifacts(tmp_path: Path) -> Artifacts:
    """Artifacts in a SQLite store of their own (for what every backend does alike)."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    actae.open(url).close()
    tables = SQLiteTables(parse_store_url(url).sqlite_path or "")
    return Artifacts(DatabaseBlobs(tables), RefRecorder(tables), KEYS)


@pytest.mark.parametrize(
    "change",
    [
        {"digest": "0" * 64},
        {"size": 10},
        {"run_id": RUN_B},
        {"media_type": "text/html"},
        {"sealed": True},
        {"mac": "0" * 64},
        {"key": "k0"},  # a key the store holds, but not the one that made the MAC
        {"key": "retired"},  # one it does not hold
    ],
    ids=lambda change: next(iter(change)),
)
def test_every_field_of_a_reference_is_authenticated(
    change: dict[str, object], artifacts: Artifacts
) -> None:
    ref = artifacts.put(RUN_A, b"attested", media_type="text/plain", data_key=None)
    forged = ref.model_copy(update=change)
    with pytest.raises(CorruptionError, match="artifact reference"):
        artifacts.open(forged, data_key=KEY_A)


def test_references_made_with_a_retired_key_still_open(artifacts: Artifacts) -> None:
    ref = artifacts.put(RUN_A, b"kept", media_type="text/plain", data_key=None)
    rotated = Artifacts(artifacts.blobs, artifacts.refs, RefKeys("k0", KEYS.secrets))
    assert rotated.read(ref, data_key=None) == b"kept"
    assert rotated.put(RUN_A, b"kept", media_type="text/plain", data_key=None).key == "k0"


def test_bad_input_is_refused_before_anything_is_stored(
    tmp_path: Path, artifacts: Artifacts
) -> None:
    for source, field in (("text", "source"), (tmp_path / "absent", "source"), (42, "source")):
        with pytest.raises(ValidationError) as caught:
            artifacts.put(RUN_A, source, media_type=BINARY, data_key=None)  # type: ignore[arg-type]
        assert caught.value.field == field
    with pytest.raises(ValidationError, match="data_key"):
        artifacts.put(RUN_A, b"x", media_type=BINARY, data_key=b"short")
    with pytest.raises(ValidationError, match="media_type"):
        artifacts.put(RUN_A, b"x", media_type="", data_key=None)
    with pytest.raises(ValidationError, match="open the file in binary mode"):
        artifacts.put(RUN_A, io.StringIO("text"), media_type=BINARY, data_key=None)  # type: ignore[arg-type]
    sealed = artifacts.put(RUN_A, b"x", media_type=BINARY, data_key=KEY_A)
    with pytest.raises(ValidationError, match="pass its run's data key"):
        artifacts.open(sealed, data_key=None)
    assert artifacts.refs.names_of(RUN_A) == [artifacts.name_of(sealed, KEY_A)]


def test_blob_store_specs(tmp_path: Path) -> None:
    tables = SQLiteTables(str(tmp_path / "runs.db"))
    in_database = blob_store(None, tables)
    assert isinstance(in_database, DatabaseBlobs)
    assert in_database.tables is tables
    files = blob_store(f"file://{tmp_path / 'new'}", tables)
    assert isinstance(files, FileBlobs)
    assert os.path.isdir(tmp_path / "new" / ".incoming")
    refused = {
        "s3://bucket/prefix": "s3:// is not supported yet",
        "ftp://host/dir": "unknown scheme",
        "file://relative/dir": "expected file:///absolute/path",
        f"file://{tmp_path / 'no' / 'such'}": "does not exist",
    }
    for spec, message in refused.items():
        with pytest.raises(ValidationError, match=message) as caught:
            blob_store(spec, tables)
        assert caught.value.field == "url.artifacts"


def test_a_sqlite_custody_transaction_takes_the_write_lock_up_front(tmp_path: Path) -> None:
    """SQLite has one writer at a time: a transaction that began as a reader and then wrote
    would be refused at once ("database is locked") if another writer came in between."""
    path = str(tmp_path / "runs.db")
    actae.open(f"sqlite:///{path}").close()
    other = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        with (
            SQLiteTables(path).transaction(),
            pytest.raises(sqlite3.OperationalError, match="locked"),
        ):
            other.execute("BEGIN IMMEDIATE")
        other.execute("BEGIN IMMEDIATE")  # released when the transaction ended
        other.execute("ROLLBACK")
    finally:
        other.close()


@pytest.mark.postgres
def test_a_postgres_custody_transaction_is_atomic_and_unseen_until_it_commits(
    pg_url: str, pg_dsn: str
) -> None:
    url = parse_store_url(pg_url)
    insert = "INSERT INTO {p}actae_artifacts (name, blob, size) VALUES (?, ?, ?)"
    count = sql.SQL("SELECT count(*) FROM {}.actae_artifacts").format(
        sql.Identifier(url.postgres_schema)
    )
    with actae.open(pg_url) as store, psycopg.connect(pg_dsn, autocommit=True) as other:
        tables = store._backend.tables()  # PostgresTables

        def written_then_undone() -> None:
            with tables.transaction() as conn:
                tables.run(conn, insert, "n-1", str(uuid.uuid4()), 1)
                assert other.execute(count).fetchone() == (0,)  # not before COMMIT
                raise ValueError("undone")

        with pytest.raises(ValueError, match="undone"):
            written_then_undone()
        assert other.execute(count).fetchone() == (0,)  # rolled back
        with tables.transaction() as conn:
            tables.run(conn, insert, "n-2", str(uuid.uuid4()), 1)
        assert other.execute(count).fetchone() == (1,)


@pytest.mark.postgres
def test_an_interrupt_in_a_postgres_custody_transaction_whose_connection_is_lost_comes_out_as_it_is(
    pg_url: str,
) -> None:
    """The rollback of a lost connection fails; that failure must not replace the interrupt."""
    with actae.open(pg_url) as store:
        tables = store._backend.tables()  # PostgresTables

        def interrupted_after_the_connection_is_lost() -> None:
            with tables.transaction() as conn:
                conn.pgconn.finish()
                raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            interrupted_after_the_connection_is_lost()
        with tables.transaction() as conn:  # the pool replaced the broken connection
            assert tables.run(conn, "SELECT 1").fetchone() == (1,)
