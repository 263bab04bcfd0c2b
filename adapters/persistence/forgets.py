"""What every read and write asks of a forget, so that no process outlives one.

A process caches runs' data keys (``adapters/custody/datakeys.py``), but the database decides.
**Writes** carry their runs, and whether in clear: the insert refuses, in its statement or
transaction, a run whose key was destroyed (``ForgottenError``) or clear contents for a keyed
run (``KeyringError``). **Reads** bring back a token every ``forget`` replaces as it destroys
the key (row ``forget-generation`` of ``actae_secrets``): a token this process has not seen
means every cached key is read again (:class:`ForgetWatch`). A read after a forget committed
sees the new token with or before its rows, so no key it uses predates the forget.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Sequence
from typing import Any
from uuid import UUID

from actae.domain.custody import locked
from actae.domain.errors import ForgottenError

KEYS_TABLE = "actae_data_keys"
SECRETS_TABLE = "actae_secrets"
TOKEN_NAME = "forget-generation"  # noqa: S105 - a row name, not a secret
"""The row of ``actae_secrets`` whose value every forget replaces."""
TOKEN_BYTES = 16


def new_token() -> bytes:
    """A fresh forget token (random: equal tokens mean no forget in between)."""
    return os.urandom(TOKEN_BYTES)


class ForgetWatch:
    """The forget token this process's reads saw last; ``version`` grows when it changes."""

    def __init__(self) -> None:
        self.version = 0
        self._token: bytes | None = None
        self._lock = threading.Lock()

    def observe(self, token: Any) -> None:
        """A read saw ``token`` (``None``: no forget ever happened in this store)."""
        seen = None if token is None else bytes(token)
        with self._lock:
            if seen != self._token:
                self._token = seen
                self.version += 1


def refuse_keyed(keys: Iterable[Sequence[Any]], *, in_clear: bool) -> None:
    """Refuse a write from its runs' key rows: forgotten first, then keyed while ``in_clear``."""
    found = [(r if isinstance(r, UUID) else UUID(str(r)), bool(gone)) for r, gone in keys]
    for run_id, forgotten in found:
        if forgotten:
            raise ForgottenError(run_id)
    if in_clear and found:
        raise locked(found[0][0])
