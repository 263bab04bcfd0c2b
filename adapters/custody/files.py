"""Blobs as files in a directory (``artifacts="file:///var/lib/actae/artifacts"``).

A blob is ``root/ab/cd/<name>``, written under ``root/.incoming``, synced, renamed into
place and its directory synced: a crash leaves no blob or the whole one. Two writers of one
name race harmlessly: a name stands for one content.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import time
from collections.abc import Iterable, Iterator

from actae.adapters.custody.chunks import CHUNK_SIZE, BlobName
from actae.domain.errors import NotFoundError, ValidationError

INCOMING = ".incoming"
NAME = re.compile(r"[0-9a-z_-]{4,128}")
"""Names that are safe as file names everywhere: no separator, no dot, no upper case (a
case-insensitive filesystem would merge two names)."""


class FileBlobs:
    """Blobs in files under ``root``, which is created if its parent exists."""

    def __init__(self, root: str) -> None:
        if not os.path.isabs(root):
            raise ValidationError("url.artifacts", f"expected an absolute path, got {root!r}")
        parent = os.path.dirname(root.rstrip("/")) or "/"
        if not os.path.isdir(root) and not os.path.isdir(parent):
            raise ValidationError(
                "url.artifacts", f"the folder {parent} does not exist; create it first"
            )
        self.root = root
        self._incoming = os.path.join(root, INCOMING)
        _make_dirs(self._incoming)

    def path(self, name: str) -> str:
        """Where the blob ``name`` lives (whether or not it exists)."""
        if not NAME.fullmatch(name):
            raise ValidationError("name", f"not a blob name: {name!r}")
        return os.path.join(self.root, name[:2], name[2:4], name)

    def put(self, name: BlobName, chunks: Iterable[bytes]) -> int:
        """Write the blob; if ``name`` exists already, the new copy is discarded."""
        handle, temporary = tempfile.mkstemp(dir=self._incoming, prefix="blob-")
        try:
            size = 0
            with os.fdopen(handle, "wb") as out:
                for chunk in chunks:
                    out.write(chunk)
                    size += len(chunk)
                out.flush()
                os.fsync(out.fileno())
            final = self.path(name())
            if os.path.exists(final):
                os.unlink(temporary)
                return size
            _make_dirs(os.path.dirname(final))
            os.replace(temporary, final)
            _sync_dir(os.path.dirname(final))
            return size
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
            raise

    def has(self, name: str) -> bool:
        """Whether the blob exists."""
        return os.path.isfile(self.path(name))

    def open(self, name: str) -> Iterator[bytes]:
        """The blob's bytes in chunks; :class:`NotFoundError` at once when it is missing.

        Opened on the first ``next``: an iterator never read holds no descriptor.
        """
        path = self.path(name)
        if not os.path.isfile(path):
            raise NotFoundError("blob", name)
        return _read(path, name)

    def delete(self, names: Iterable[str]) -> int:
        """Remove these blobs; how many existed."""
        removed = 0
        for name in names:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path(name))
                removed += 1
        return removed

    def sweep(self, older_than: float) -> int:
        """Remove what crashed writes left in ``.incoming``, untouched for ``older_than`` s."""
        limit = time.time() - older_than
        removed = 0
        with os.scandir(self._incoming) as entries:
            for entry in entries:
                with contextlib.suppress(FileNotFoundError):
                    if entry.stat().st_mtime < limit:
                        os.unlink(entry.path)
                        removed += 1
        return removed


def _read(path: str, name: str) -> Iterator[bytes]:
    try:
        source = open(path, "rb")  # noqa: SIM115 - closed by the with below, after the check
    except FileNotFoundError:  # deleted since open() checked
        raise NotFoundError("blob", name) from None
    with source:
        while chunk := source.read(CHUNK_SIZE):
            yield chunk


def _make_dirs(path: str) -> None:
    """Create ``path`` and its missing parents, syncing each parent that gained an entry."""
    if os.path.isdir(path):
        return
    _make_dirs(os.path.dirname(path))
    with contextlib.suppress(FileExistsError):  # another writer made it meanwhile
        os.mkdir(path)
    _sync_dir(os.path.dirname(path))


def _sync_dir(path: str) -> None:
    """Make a directory's entries durable (a rename is not, until its directory is synced)."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
