"""A mock payment provider with its own idempotency-key ledger, shared through a file.

It stands for the outside world: it remembers every charge by idempotency key, so the
tests can count charges from the provider's side, not from anything Actae says.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any


class MockProvider:
    """Charges keyed by idempotency key; a repeated key returns the original charge."""

    def __init__(self, path: Path) -> None:
        self.path = path
        with self._db() as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS charges (idempotency_key TEXT PRIMARY KEY, "
                "amount INTEGER, token INTEGER, requests INTEGER DEFAULT 1)"
            )

    def _db(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=30, isolation_level=None)

    def charge(self, key: str, amount: int, token: int) -> dict[str, Any]:
        """Charge once per key; later requests with the same key return the first charge."""
        with self._db() as db:
            db.execute(
                "INSERT INTO charges (idempotency_key, amount, token) VALUES (?, ?, ?) "
                "ON CONFLICT (idempotency_key) DO UPDATE SET requests = requests + 1",
                (key, amount, token),
            )
        found = self.lookup(key)
        assert found is not None
        return found

    def lookup(self, key: str) -> dict[str, Any] | None:
        """The charge made under ``key``, if any (what a reconcile asks)."""
        with self._db() as db:
            row = db.execute(
                "SELECT idempotency_key, amount, token FROM charges WHERE idempotency_key = ?",
                (key,),
            ).fetchone()
        return (
            None
            if row is None
            else {"charge_id": f"ch_{row[0]}", "amount": row[1], "token": row[2]}
        )

    def charges(self) -> int:
        """How many distinct charges were made."""
        with self._db() as db:
            (count,) = db.execute("SELECT count(*) FROM charges").fetchone()
        return int(count)

    def requests(self) -> int:
        """How many charge requests arrived, duplicates included."""
        with self._db() as db:
            (count,) = db.execute("SELECT coalesce(sum(requests), 0) FROM charges").fetchone()
        return int(count)
