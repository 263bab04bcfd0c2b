"""How artifact bytes are cut: 1 MiB chunks, so that a gigabyte never sits in memory.

Every layer moves a chunk at a time; a database row holds one chunk as given (a sealed one
is 28 bytes longer), and :func:`bounded` only splits what another caller might pass whole.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from actae.domain.errors import CorruptionError

CHUNK_SIZE = 1 << 20
"""Plaintext bytes per chunk: large enough that per-row and per-call costs vanish next to
the copying, small enough that a few of them in flight stay far below any memory limit."""

MAX_PIECE = CHUNK_SIZE + 1024
"""The most one stored row holds: a sealed chunk (nonce and tag added) fits with room."""

BlobName = str | Callable[[], str]
"""A blob's name, or a function that gives it once its chunks have all been consumed: an
artifact is named by its digest, which is known only at the end of the stream."""


def bounded(chunks: Iterable[bytes], limit: int = MAX_PIECE) -> Iterator[bytes]:
    """``chunks`` as ``bytes``, none empty and none longer than ``limit`` (those are split).

    Chunks within the limit pass without a copy, so a sealed chunk stays one row.
    """
    for chunk in chunks:
        view = memoryview(chunk).cast("B")
        for start in range(0, len(view), limit):
            piece = view[start : start + limit]
            yield chunk if isinstance(chunk, bytes) and len(piece) == len(view) else bytes(piece)


def resolved(name: BlobName) -> str:
    """The name itself, or what the function gives (call it only after the chunks end)."""
    return name if isinstance(name, str) else name()


def checked_rows(
    name: str, size: int, fetch: Callable[[int], list[tuple[int, bytes]]]
) -> Iterator[bytes]:
    """A database blob's chunks from ``fetch(first_seq)`` batches, checked as they come.

    The rows must number 0, 1, 2, ... and add up to ``size``: a deleted or added row is
    reported by number before a reader is given bytes it would only find wrong at the end.
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
