"""Which runs reference which artifacts: recorded in the store's database, always.

Blobs may live elsewhere (a directory), but who references them is the store's business:
retention asks it which names a purged run leaves unreferenced, and only those blobs go.
A name can be referenced by many runs (clear artifacts are named by their digest, so equal
content is stored once across runs), and a blob is deleted only when none is left.
"""

from __future__ import annotations

from typing import Protocol
from uuid import UUID


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
