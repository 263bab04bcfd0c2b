"""What an artifact can be made from, read as 1 MiB chunks: bytes, a binary file, a path.

Every chunk but the last is exactly ``CHUNK_SIZE`` bytes, even from a pipe that reads
short: the chunk cipher frames sealed chunks by that size. A ``str`` is refused (content,
or a path?).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Protocol

from actae.adapters.custody.chunks import CHUNK_SIZE
from actae.domain.errors import ValidationError


class Readable(Protocol):
    """A binary file object, as far as an artifact needs one."""

    def read(self, size: int = -1, /) -> bytes | None:
        """Up to ``size`` bytes; ``b""`` at the end."""
        ...


Source = bytes | bytearray | memoryview | Readable | os.PathLike[str]
"""What :meth:`~actae.adapters.custody.artifacts.Artifacts.put` accepts."""


def chunks_of(source: Source) -> Iterator[bytes]:
    """The source's bytes in chunks; refused with :class:`ValidationError` before any read."""
    if isinstance(source, bytes | bytearray | memoryview):
        return _from_memory(memoryview(source).cast("B"))
    if isinstance(source, str):
        raise ValidationError(
            "source", "a str is neither bytes nor a path; pass bytes, a binary file or a Path"
        )
    if isinstance(source, os.PathLike):
        path = os.fspath(source)
        if not os.path.isfile(path):
            raise ValidationError("source", f"no file at {path}")
        return _from_path(path)
    if callable(getattr(source, "read", None)):
        return _from_file(source)
    raise ValidationError(
        "source", f"expected bytes, a binary file or a path, got {type(source).__name__}"
    )


def _from_memory(view: memoryview) -> Iterator[bytes]:
    for start in range(0, len(view), CHUNK_SIZE):
        yield bytes(view[start : start + CHUNK_SIZE])


def _from_path(path: str) -> Iterator[bytes]:
    with open(path, "rb") as file:
        yield from _from_file(file)


def _from_file(file: Readable) -> Iterator[bytes]:
    """Chunks of exactly ``CHUNK_SIZE`` bytes (fewer only at the end), however ``read`` counts."""
    while chunk := _read(file, CHUNK_SIZE):
        if len(chunk) < CHUNK_SIZE:
            buffer = bytearray(chunk)
            while len(buffer) < CHUNK_SIZE and (more := _read(file, CHUNK_SIZE - len(buffer))):
                buffer += more
            chunk = bytes(buffer)
        yield chunk
        if len(chunk) < CHUNK_SIZE:
            return


def _read(file: Readable, size: int) -> bytes:
    data = file.read(size)
    if data is None:
        raise ValidationError(
            "source", "the file is non-blocking and had no data; pass a blocking one"
        )
    if not isinstance(data, bytes | bytearray | memoryview):
        raise ValidationError(
            "source", f"read() returned {type(data).__name__}; open the file in binary mode"
        )
    return bytes(data)
