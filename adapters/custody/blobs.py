"""Where artifact bytes live, by name: the store's database or a directory.

A :class:`BlobStore` knows names and bytes, nothing about runs, keys or digests; the
:class:`~actae.adapters.custody.artifacts.Artifacts` above it decides names and checks what
comes back. Every backend streams: ``put`` consumes an iterable of chunks and ``open``
returns an iterator of chunks, so a gigabyte passes through a few megabytes of memory.
``put`` is idempotent by name:
the name stands for the content, so when it exists the new bytes are discarded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Protocol
from urllib.parse import unquote, urlsplit

from actae.adapters.custody.files import FileBlobs
from actae.adapters.custody.pieces import BlobName
from actae.domain.errors import ValidationError


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


def blob_store(spec: str | None, in_database: Callable[[], BlobStore]) -> BlobStore:
    """The blob store that ``spec`` names.

    ``None`` keeps the bytes in the store's database (``in_database`` makes that one);
    ``file:///abs/path`` puts them in that directory.
    """
    return in_database() if spec is None else _elsewhere(spec)


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
