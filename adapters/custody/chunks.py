"""The chunk cipher: each 1 MiB chunk sealed on its own with AES-256-GCM, bound to its place.

A sealed chunk is ``nonce (12 bytes) || ciphertext || tag (16 bytes)``. Its associated data
binds it to the format, the run, its index, whether it is the last and, on the last, the
artifact's size and SHA-256: no chunk can be moved, reordered, dropped, cut or extended,
and the last tag proves the bytes were written as *that* artifact (the reader takes size
and digest from the reference whose MAC it checked). Every chunk but the last holds
``CHUNK_SIZE`` plaintext bytes, so a blob is cut back into sealed chunks however its store
chunked it (:func:`records`). HKDF-Expand derives the chunk and name keys from the data key.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Iterable, Iterator
from uuid import UUID

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

from actae.adapters.custody.keyring import KEY_BYTES, NONCE_BYTES, seal, unseal
from actae.domain.errors import CorruptionError, ValidationError

CHUNK_SIZE = 1 << 20
"""Plaintext bytes per chunk: large enough that per-row and per-call costs vanish next to
the copying, small enough that a few of them in flight stay far below any memory limit (a
gigabyte never sits in memory)."""
BlobName = Callable[[], str]
"""Gives a blob's name, called once its chunks have all been consumed: an artifact is named
by its digest, which is known only at the end of the stream."""
FORMAT = b"actae/artifact-chunk/1"
TAG_BYTES = 16
OVERHEAD = NONCE_BYTES + TAG_BYTES
SEALED_CHUNK = CHUNK_SIZE + OVERHEAD
"""Stored bytes of every sealed chunk but the last."""


def subkey(data_key: bytes, purpose: bytes) -> bytes:
    """A key for one purpose, derived from a run's data key (HKDF-Expand, SHA-256)."""
    if not isinstance(data_key, bytes | bytearray) or len(data_key) != KEY_BYTES:
        raise ValidationError("data_key", f"expected {KEY_BYTES} bytes (an AES-256 key)")
    return HKDFExpand(SHA256(), KEY_BYTES, b"actae/artifact/" + purpose).derive(bytes(data_key))


def sealed_name(data_key: bytes, run_id: UUID, digest: str) -> str:
    """A sealed artifact's blob name: HMAC-SHA256 of its run and digest, under its key.

    One blob per content in a run, telling nothing; the run is in it so two runs sharing a
    key still get blobs of their own.
    """
    message = run_id.bytes + bytes.fromhex(digest)
    return hmac.new(subkey(data_key, b"name"), message, hashlib.sha256).hexdigest()


class ChunkCipher:
    """Seals and opens the chunks of one run's artifacts under its data key."""

    def __init__(self, data_key: bytes, run_id: UUID) -> None:
        self._key = subkey(data_key, b"chunk")
        self._run = run_id.bytes

    def _associated(self, index: int, end: tuple[int, str] | None) -> bytes:
        if end is None:
            return b"%s|%s|%d|more" % (FORMAT, self._run, index)
        size, digest = end
        return b"%s|%s|%d|last|%d|%s" % (FORMAT, self._run, index, size, digest.encode())

    def seal(self, plaintext: bytes, index: int, end: tuple[int, str] | None) -> bytes:
        """The sealed chunk ``index``; ``end`` is (size, digest) when it is the last."""
        return seal(self._key, plaintext, self._associated(index, end))

    def open(self, sealed: bytes, index: int, end: tuple[int, str] | None, what: str) -> bytes:
        """The plaintext of chunk ``index``, or :class:`CorruptionError` naming ``what``."""
        try:
            return unseal(self._key, sealed, self._associated(index, end))
        except InvalidTag:
            place = "last chunk" if end is not None else "chunk"
            raise CorruptionError(
                what,
                f"{place} {index} failed authentication: its bytes were changed, moved, "
                "cut short or belong to another artifact, run or key",
            ) from None


def chunk_count(size: int) -> int:
    """How many chunks an artifact of ``size`` bytes has (an empty one has one, empty)."""
    return max(1, -(-size // CHUNK_SIZE))


def records(pieces: Iterable[bytes]) -> Iterator[bytes]:
    """The stored stream cut back into sealed chunks (whole ones pass without a copy)."""
    buffer = bytearray()
    for piece in pieces:
        if not buffer and len(piece) == SEALED_CHUNK:
            yield piece
            continue
        buffer += piece
        while len(buffer) >= SEALED_CHUNK:
            yield bytes(buffer[:SEALED_CHUNK])
            del buffer[:SEALED_CHUNK]
    if buffer:
        yield bytes(buffer)
