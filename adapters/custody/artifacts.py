"""Artifacts: large bytes of a run, kept outside the event log and handed back verified.

A clear blob is named by its SHA-256, a sealed one by a keyed name (docs/data.md); the
references let retention delete blobs whose key is forgotten. The reference's MAC covers
the sealed flag too: a reference cannot be flipped to look up the clear name of the content.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any
from uuid import UUID

from actae.adapters.custody.blobs import BlobStore
from actae.adapters.custody.chunks import CHUNK_SIZE, ChunkCipher, sealed_name
from actae.adapters.custody.keyring import KEY_BYTES
from actae.adapters.custody.reading import (
    ArtifactStream,
    Tally,
    clear_chunks,
    sealed_chunks,
    with_last,
)
from actae.adapters.custody.refs import RefRecorder
from actae.adapters.custody.sources import Source, chunks_of
from actae.domain.artifacts import ArtifactRef
from actae.domain.errors import CorruptionError, NotFoundError, ValidationError

REF_FORMAT = b"actae/artifact-ref/1"
MAX_MEDIA_TYPE = 255
MAC_FIELDS = {"digest", "size", "media_type", "run_id", "sealed"}
"""What a reference's MAC covers: every field but the key's id and the MAC itself."""


@dataclass(frozen=True)
class RefKeys:
    """The keys that MAC artifact references: the current one's id, every secret by id."""

    current: str
    secrets: Mapping[str, bytes] = field(repr=False)

    def __post_init__(self) -> None:
        for key_id, secret in self.secrets.items():
            if not isinstance(secret, bytes) or len(secret) != KEY_BYTES:
                raise ValidationError(f"keys.{key_id}", f"expected a {KEY_BYTES}-byte secret")
        if self.current not in self.secrets:
            raise ValidationError("keys.current", f"no secret for key {self.current!r}")
        object.__setattr__(self, "secrets", MappingProxyType(dict(self.secrets)))


def ref_mac(
    secret: bytes, *, digest: str, size: int, media_type: str, run_id: UUID, sealed: bool
) -> str:
    """HMAC-SHA256 of a reference's fields, each length-prefixed (no two encode alike)."""
    fields = (
        REF_FORMAT,
        digest.encode(),
        str(size).encode(),
        media_type.encode(),
        str(run_id).encode(),
        b"sealed" if sealed else b"clear",
    )
    message = b"".join(len(part).to_bytes(4, "big") + part for part in fields)
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


class Artifacts:
    """Put and open a store's artifacts: bytes in ``blobs``, who references them in ``refs``."""

    def __init__(self, blobs: BlobStore, refs: RefRecorder, keys: RefKeys) -> None:
        self.blobs = blobs
        self.refs = refs
        self.keys = keys

    def put(
        self, run_id: UUID, source: Source, *, media_type: str, data_key: bytes | None
    ) -> ArtifactRef:
        """Stream ``source`` in as ``run_id``'s artifact; its reference (refusals come first).

        ``data_key`` has no default, so no caller stores clear bytes by forgetting it.
        """
        if not isinstance(run_id, UUID):
            raise ValidationError("run_id", f"expected a UUID, got {type(run_id).__name__}")
        if not isinstance(media_type, str) or not 1 <= len(media_type) <= MAX_MEDIA_TYPE:
            raise ValidationError("media_type", f"expected 1 to {MAX_MEDIA_TYPE} characters")
        cipher = ChunkCipher(data_key, run_id) if data_key is not None else None
        chunks = chunks_of(source)
        seen = self._held(source, run_id, data_key)
        if seen is None:
            seen = Tally()
            stored = _stored(chunks, seen, cipher)

            def name() -> str:  # called by the blob store once the chunks are exhausted
                return self._name(seen.hexdigest(), run_id, data_key)

            self.blobs.put(name, stored)
        digest = seen.hexdigest()
        self.refs.add_ref(self._name(digest, run_id, data_key), run_id)
        fields: dict[str, Any] = {"digest": digest, "size": seen.size, "media_type": media_type}
        fields.update(run_id=run_id, sealed=data_key is not None)
        mac = ref_mac(self.keys.secrets[self.keys.current], **fields)
        return ArtifactRef(**fields, key=self.keys.current, mac=mac)

    def _held(self, source: Source, run_id: UUID, key: bytes | None) -> Tally | None:
        """The digest of bytes in memory that are stored already; else ``None``."""
        if not isinstance(source, bytes | bytearray | memoryview):
            return None
        probe = Tally()
        probe.add(memoryview(source).cast("B"))
        if not self.blobs.has(self._name(probe.hexdigest(), run_id, key)):
            return None
        return probe

    def verify(self, ref: ArtifactRef) -> None:
        """Check the reference's MAC; :class:`CorruptionError` if it fails or its key is gone."""
        what = f"artifact reference {ref.digest}"
        secret = self.keys.secrets.get(ref.key)
        if secret is None:
            raise CorruptionError(what, f"it was made with key {ref.key!r}, which is not held")
        expected = ref_mac(secret, **ref.model_dump(include=MAC_FIELDS))
        if not hmac.compare_digest(expected, ref.mac):
            raise CorruptionError(what, "its MAC does not match: it was altered or forged")

    def open(self, ref: ArtifactRef, *, data_key: bytes | None) -> io.BufferedReader:
        """A binary stream of the artifact's bytes, verified as they are read.

        A bad MAC or a missing blob raise :class:`CorruptionError` here, a bad chunk, size
        or digest at the read that meets it: **read to the end** to have the whole checked.
        """
        self.verify(ref)
        name = self.name_of(ref, data_key)
        try:
            pieces = self.blobs.open(name)
        except NotFoundError:
            detail = "its bytes are missing" + (
                " (or the data key is not its run's)" if ref.sealed else ""
            )
            raise CorruptionError(f"artifact {ref.digest}", detail) from None
        if ref.sealed:
            assert data_key is not None  # noqa: S101 - name_of refused a sealed ref without one
            chunks = sealed_chunks(pieces, ref, ChunkCipher(data_key, ref.run_id))
        else:
            chunks = clear_chunks(pieces, ref)
        return io.BufferedReader(ArtifactStream(chunks), buffer_size=CHUNK_SIZE)

    def read(self, ref: ArtifactRef, *, data_key: bytes | None) -> bytes:
        """The whole artifact, verified (for small ones: it is all in memory)."""
        with self.open(ref, data_key=data_key) as stream:
            return stream.read()

    def name_of(self, ref: ArtifactRef, data_key: bytes | None) -> str:
        """The name of ``ref``'s blob (a sealed one's needs its run's data key)."""
        if ref.sealed and data_key is None:
            raise ValidationError("data_key", "the artifact is sealed; pass its run's data key")
        return self._name(ref.digest, ref.run_id, data_key if ref.sealed else None)

    @staticmethod
    def _name(digest: str, run_id: UUID, data_key: bytes | None) -> str:
        return digest if data_key is None else sealed_name(data_key, run_id, digest)

    def purge(self, run_id: UUID) -> int:
        """Drop ``run_id``'s references and delete the blobs no run references; how many.

        For runs that are over: a concurrent put of the same clear content could skip the blob.
        """
        return self.blobs.delete(self.refs.drop_refs(run_id))


def _stored(plaintext: Iterator[bytes], seen: Tally, cipher: ChunkCipher | None) -> Iterator[bytes]:
    """The chunks to store: hashed, then sealed when there is a cipher, read one ahead.

    An empty source gives one sealed chunk: a sealed empty artifact is not a lost one.
    """
    if cipher is None:
        yield from map(seen.add, plaintext)
        return
    first = next(plaintext, b"")
    for index, (chunk, last) in enumerate(with_last(itertools.chain([first], plaintext))):
        seen.add(chunk)
        yield cipher.seal(chunk, index, (seen.size, seen.hexdigest()) if last else None)
