"""Reading an artifact back: a file-like stream that checks every chunk it hands out.

Read one chunk ahead, so the last is known before it is released: a sealed chunk goes once
its tag verifies, and size and SHA-256 are checked before the last goes. End of file is
never reported for bytes that failed. **A consumer that stops early has had its sealed
chunks' tags checked but not the digest of the whole.**
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator
from typing import TYPE_CHECKING, TypeVar

from actae.adapters.custody.chunks import ChunkCipher, chunk_count, records
from actae.domain.artifacts import ArtifactRef
from actae.domain.errors import CorruptionError

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

T = TypeVar("T")
Chunk = TypeVar("Chunk", bytes, memoryview)


class Tally:
    """The size and SHA-256 of the bytes so far; reading, checked against reference ``ref``."""

    def __init__(self, ref: ArtifactRef | None = None) -> None:
        self.ref = ref
        self.what = f"artifact {ref.digest}" if ref is not None else "artifact"
        self.size = 0
        self._hash = hashlib.sha256()

    def add(self, chunk: Chunk) -> Chunk:
        """Count and hash a chunk; refuse at once if the total passes the reference's size."""
        self.size += len(chunk)
        if self.ref is not None and self.size > self.ref.size:
            raise CorruptionError(self.what, f"more than its {self.ref.size} bytes are stored")
        self._hash.update(chunk)
        return chunk

    def hexdigest(self) -> str:
        """The SHA-256 so far, as hex."""
        return self._hash.hexdigest()

    def finish(self) -> None:
        """Check the total size and the digest (called before the last chunk is released)."""
        assert self.ref is not None  # noqa: S101 - only a reading tally finishes
        if self.size != self.ref.size:
            raise CorruptionError(self.what, f"{self.size} of its {self.ref.size} bytes are stored")
        if self._hash.hexdigest() != self.ref.digest:
            raise CorruptionError(self.what, f"the stored bytes hash to {self._hash.hexdigest()}")


def with_last(items: Iterator[T]) -> Iterator[tuple[T, bool]]:
    """Each item with whether it is the last, read one ahead."""
    current = next(items, None)
    while current is not None:
        following = next(items, None)
        yield current, following is None
        current = following


def clear_chunks(pieces: Iterator[bytes], ref: ArtifactRef) -> Iterator[bytes]:
    """A clear artifact's bytes, the last piece withheld until size and digest match."""
    tally = Tally(ref)
    for piece, last in with_last(pieces):
        tally.add(piece)
        if last:
            tally.finish()
        yield piece
    tally.finish()  # an empty blob has no last piece


def sealed_chunks(
    pieces: Iterator[bytes], ref: ArtifactRef, cipher: ChunkCipher
) -> Iterator[bytes]:
    """A sealed artifact's plaintext, each chunk released once its tag verifies."""
    tally = Tally(ref)
    count = chunk_count(ref.size)
    index = 0
    for record, last in with_last(records(pieces)):
        final = index == count - 1
        if index >= count or final != last:
            found = "more" if index >= count or not last else "fewer"
            raise CorruptionError(tally.what, f"{found} than its {count} chunks are stored")
        end = (ref.size, ref.digest) if final else None
        plaintext = cipher.open(record, index, end, tally.what)
        tally.add(plaintext)
        if final:
            tally.finish()
        yield plaintext
        index += 1
    if index == 0:
        raise CorruptionError(tally.what, "no chunk is stored")


class ArtifactStream(io.RawIOBase):
    """A readable binary stream over verified chunks; closing it closes their iterator."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        super().__init__()
        self._chunks = chunks
        self._current = memoryview(b"")

    def readable(self) -> bool:
        """Always: it is made for reading."""
        return True

    def readinto(self, buffer: WriteableBuffer, /) -> int:
        """Fill ``buffer`` from the current chunk, pulling the next when it is used up."""
        while not self._current:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._current = memoryview(chunk)
        target = memoryview(buffer).cast("B")
        count = min(len(target), len(self._current))
        target[:count] = self._current[:count]
        self._current = self._current[count:]
        return count

    def readall(self) -> bytes:
        """Everything left, joined once (not in 8 KiB reads)."""
        rest = [bytes(self._current), *self._chunks]
        self._current = memoryview(b"")
        return b"".join(rest)

    def close(self) -> None:
        """Close the stream and the chunk iterator behind it."""
        if not self.closed:
            close = getattr(self._chunks, "close", None)
            if close is not None:
                close()
        super().close()
