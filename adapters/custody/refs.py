"""Which runs reference which artifacts: recorded in the store's database, always.

Retention asks it which names a purged run leaves unreferenced, and only those blobs go,
wherever they live. A name can be referenced by many runs (clear artifacts are named by
their digest), and a blob is deleted only when none is left.
"""

from __future__ import annotations

from uuid import UUID

from actae.adapters.custody.tables import Tables


class RefRecorder:
    """The (name, run) pairs of artifact references, in ``actae_artifact_refs``."""

    def __init__(self, tables: Tables) -> None:
        self.tables = tables

    def add_ref(self, name: str, run_id: UUID) -> None:
        """Record that ``run_id`` references ``name`` (again: no change)."""
        sql = (
            "INSERT INTO {p}actae_artifact_refs (name, run_id) VALUES (?, ?) ON CONFLICT DO NOTHING"
        )
        with self.tables.connection() as conn:
            self.tables.run(conn, sql, name, str(run_id))

    def names_of(self, run_id: UUID) -> list[str]:
        """The names ``run_id`` references, sorted."""
        sql = "SELECT name FROM {p}actae_artifact_refs WHERE run_id = ? ORDER BY name"
        with self.tables.connection() as conn:
            return [name for (name,) in self.tables.run(conn, sql, str(run_id))]

    def drop_refs(self, run_id: UUID) -> list[str]:
        """Forget ``run_id``'s references; the names no run references any more, sorted."""
        drop = "DELETE FROM {p}actae_artifact_refs WHERE run_id = ? RETURNING name"
        used = "SELECT 1 FROM {p}actae_artifact_refs WHERE name = ? LIMIT 1"
        run = self.tables.run
        with self.tables.transaction() as conn:
            dropped = {name for (name,) in run(conn, drop, str(run_id)).fetchall()}
            return sorted(n for n in dropped if run(conn, used, n).fetchone() is None)
