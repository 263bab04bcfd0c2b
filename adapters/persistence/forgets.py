"""What every read and write asks of a forget, so that no process outlives one.

A process keeps runs' unwrapped data keys in memory (``adapters/custody/datakeys.py``),
which saves a key lookup per event. A cache may save a read, but the database decides:

* **Writes** carry the runs whose contents they hold, and whether those contents go in
  clear (the store has no keyring). The insert refuses, in the same statement (PostgreSQL)
  or transaction (SQLite), when one of those runs' data key was destroyed, or when clear
  contents would join a run that has a key: nothing is written, and the caller gets
  ``ForgottenError``, or the ``KeyringError`` of a store without the keyring.
* **Reads** bring back a token that every ``forget`` replaces in the transaction that
  destroys the key (the row ``forget-generation`` of ``actae_secrets``): in the read's own
  statement on PostgreSQL, just before the rows on SQLite (in process, no round trip).
  When a read brings a token this process has not seen, no cached key is trusted any more:
  each is read again from ``actae_data_keys`` before it opens anything (:class:`ForgetWatch`).

Why the token is enough: a read that starts after a forget committed sees the new token
(read before or with its rows), so every key it uses is looked up after the forget, and
the forgotten one is found destroyed. A read that started before the forget committed
overlaps it, and may see either side. The row lives in ``actae_secrets`` so that no schema
change is needed; it holds 16 random bytes and no secret.
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
    """The forget token this process's reads saw last, and how often it changed.

    ``version`` grows each time a read brings another token: a key cached under an older
    version is looked up again before use.
    """

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
    """Why a write must not happen, from the key rows of its runs (run id, forgotten).

    ``ForgottenError`` for a forgotten run first (whatever the keyring); then, if the
    contents go in clear, ``KeyringError`` for a run that has a key at all.
    """
    found = [(r if isinstance(r, UUID) else UUID(str(r)), bool(gone)) for r, gone in keys]
    for run_id, forgotten in found:
        if forgotten:
            raise ForgottenError(run_id)
    if in_clear and found:
        raise locked(found[0][0])
