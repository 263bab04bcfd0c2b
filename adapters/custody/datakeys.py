"""Each run's data key: made on the run's first sealed write, wrapped by a master key.

``actae_data_keys`` holds each run's AES-256 data key wrapped (AES-256-GCM) by a master key
of the keyring. Forgetting sets the wrapped key to NULL; rotation re-wraps the keys. A key
is made by an insert that keeps an existing row (racing writers agree on the first key).
Unwrapped keys are cached, but none outlives a forget in any process: every read brings
back the token each forget replaces, and a new token sends every key back to the table
(:mod:`~actae.adapters.persistence.forgets`).
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from cryptography.exceptions import InvalidTag

from actae.adapters.custody.keyring import KEY_BYTES, Keyring, load_keyring, seal, unseal
from actae.adapters.custody.tables import Tables
from actae.adapters.persistence.awaiting import off_the_loop
from actae.adapters.persistence.forgets import TOKEN_NAME, ForgetWatch, new_token, refuse_keyed
from actae.domain.custody import locked
from actae.domain.errors import CorruptionError, ForgottenError

CACHE_SECONDS = 30.0
"""How long an unwrapped data key is trusted without asking the table again."""
CACHE_SIZE = 10_000
"""Unwrapped keys kept at most (32 bytes each, plus bookkeeping)."""


@dataclass(frozen=True)
class StoredKey:
    """A run's row: the master key that wraps it, and the wrapped key (``None``: forgotten)."""

    master_key: str
    wrapped: bytes | None


CLEAR = "clear"
"""Cached for a run that has no data key: its contents are written in clear."""
FORGOTTEN = "forgotten"
"""Cached for a run whose data key was destroyed."""
KEYED = "keyed"
"""Cached for a run that has a key this store cannot open (it has no keyring)."""


class DataKeys:
    """Data keys of runs, unwrapped with the keyring (``None``: no encryption for new runs).

    A run gets its key when it is born with a keyring, never later: a run written in clear
    stays so, and forgetting it is refused, not pretended. While the key table is empty
    (asked again every ``CACHE_SECONDS``) no run is looked up on reading. A changed keyring
    file is read again (rotation).
    """

    def __init__(
        self, table: SqlKeyTable, keyring: Keyring | None, watch: ForgetWatch | None = None
    ) -> None:
        self.table = table
        self.keyring = keyring
        self._watch = watch if watch is not None else ForgetWatch()
        self._encrypted_before: bool | None = None
        self._asked_at = float("-inf")
        self._keyring_checked_at = time.monotonic()
        self._keyring_stamp = _stamp_of(keyring)
        self._cache: OrderedDict[UUID, tuple[float, int, bytes | str]] = OrderedDict()
        """Per run: until when, under which forget version (:class:`ForgetWatch`), the entry."""
        self._lock = threading.Lock()

    @property
    def encrypting(self) -> bool:
        """Whether new runs get a data key (the store was opened with a keyring)."""
        return self.keyring is not None

    def for_write(self, run_id: UUID, *, born: bool = False) -> bytes | None:
        """The key to seal the run's new contents with (``None``: clear); made if ``born``.

        ``ForgottenError`` for a forgotten run; ``KeyringError`` when no keyring opens its key.
        Without a keyring the table is asked every time: blobs are written before the
        insert that would refuse clear contents for a keyed run.
        """
        if self.keyring is None:
            stored = off_the_loop(self.table.get, run_id)
            keyed = [] if stored is None else [(run_id, stored.wrapped is None)]
            refuse_keyed(keyed, in_clear=True)
            return None
        entry = self._entry(run_id, create=born)
        return None if entry == CLEAR else self._usable(run_id, entry)

    def for_read(self, run_id: UUID, *, fresh: bool = False) -> bytes:
        """The key that opens the run's sealed contents (``fresh``: asked of the table now)."""
        if fresh:
            with self._lock:
                self._cache.pop(run_id, None)
        entry = self._entry(run_id, create=False)
        if entry == CLEAR:
            raise CorruptionError(f"run {run_id}", "sealed contents but no data key")
        return self._usable(run_id, entry)

    def clear_allowed(self, run_id: UUID) -> str | None:
        """Why clear contents must not be read as the run's: forgotten, encrypted, or ``None``.

        Every content of a keyed run is sealed, so clear ones were tampered with.
        """
        if not self.ever_encrypted():
            return None
        entry = self._entry(run_id, create=False)
        if entry == CLEAR:
            return None
        return FORGOTTEN if entry == FORGOTTEN else "encrypted"

    def prepare(self) -> None:
        """Learn whether the store ever encrypted (once its tables exist, before any write)."""
        self._encrypted_before = self.table.any()
        self._asked_at = time.monotonic()

    def ever_encrypted(self) -> bool:
        """Whether the store holds keys (a ``False`` is asked again after a while)."""
        if not self._encrypted_before and time.monotonic() - self._asked_at > CACHE_SECONDS:
            self._encrypted_before = off_the_loop(self.table.any)
            self._asked_at = time.monotonic()
        return bool(self._encrypted_before)

    def present(self, run_ids: Sequence[UUID]) -> dict[UUID, bool]:
        """Which of these runs have a key row, each with whether the key is live."""
        return off_the_loop(self.table.present, run_ids) if run_ids else {}

    def drop(self, run_ids: Sequence[UUID]) -> int:
        """Delete the keys of purged runs, rows and all; how many there were."""
        dropped = off_the_loop(self.table.drop, run_ids) if run_ids else 0
        for run_id in run_ids:
            self._remember(run_id, FORGOTTEN)
        return dropped

    def forget(self, run_id: UUID) -> bool:
        """Destroy the run's data key; whether there was one to destroy."""
        destroyed = off_the_loop(self.table.destroy, run_id)
        self._remember(run_id, FORGOTTEN)
        return destroyed

    def rewrap_all(self, *, batch: int = 500, progress: Callable[[int], None] | None = None) -> int:
        """Re-wrap every live data key under the keyring's current master key; how many."""
        keyring = self._keyring()
        done = 0
        while rows := off_the_loop(self.table.stale, keyring.current, batch):
            for run_id, old in rows:
                new = wrap(keyring, run_id, unwrap(keyring, run_id, old))
                done += off_the_loop(self.table.rewrap, run_id, old, new)
            if progress is not None:
                progress(done)
        return done

    def _keyring(self) -> Keyring:
        """The keyring, read again if its file changed (a rotation added a key)."""
        keyring = self.keyring
        if keyring is None:
            raise locked(None)
        if (
            keyring.path is not None
            and time.monotonic() >= self._keyring_checked_at + CACHE_SECONDS
        ):
            self._keyring_checked_at = time.monotonic()
            if (stamp := _stamp_of(keyring)) != self._keyring_stamp:
                keyring = self.keyring = load_keyring(keyring.path)
                self._keyring_stamp = stamp
        return keyring

    def _usable(self, run_id: UUID, entry: bytes | str) -> bytes:
        if entry == FORGOTTEN:
            raise ForgottenError(run_id)
        if entry == KEYED:
            raise locked(run_id)
        assert isinstance(entry, bytes)  # noqa: S101 - CLEAR is handled by the callers
        return entry

    def _entry(self, run_id: UUID, *, create: bool) -> bytes | str:
        """The run's cached entry, else read (and made, with ``create``) and cached."""
        version = self._watch.version  # before the lookup: a forget seen later voids it
        with self._lock:
            cached = self._cache.get(run_id)
            if cached is not None and cached[0] >= time.monotonic() and cached[1] == version:
                self._cache.move_to_end(run_id)
                return cached[2]
        stored = off_the_loop(self.table.get, run_id)
        if stored is None and create:
            fresh = wrap(self._keyring(), run_id, os.urandom(KEY_BYTES))
            stored = off_the_loop(self.table.add, run_id, fresh)
            self._encrypted_before = True
        entry: bytes | str
        if stored is None:
            entry = CLEAR
        elif stored.wrapped is None:
            entry = FORGOTTEN
        elif self.keyring is None:
            entry = KEYED
        else:
            entry = self._unwrapped(run_id, stored)
        self._remember(run_id, entry, version)
        return entry

    def _unwrapped(self, run_id: UUID, stored: StoredKey) -> bytes:
        """The data key in ``stored``; a keyring that lacks its master key is read again."""
        keyring = self._keyring()
        if stored.master_key not in keyring.secrets and keyring.path is not None:
            self._keyring_checked_at = float("-inf")  # a rotation this process missed
            keyring = self._keyring()
        return unwrap(keyring, run_id, stored)

    def _remember(self, run_id: UUID, entry: bytes | str, version: int | None = None) -> None:
        seen = self._watch.version if version is None else version
        with self._lock:
            self._cache[run_id] = (time.monotonic() + CACHE_SECONDS, seen, entry)
            self._cache.move_to_end(run_id)
            while len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)


def _stamp_of(keyring: Keyring | None) -> tuple[int, int] | None:
    """The keyring file's modification time and size (``None``: no file to watch)."""
    if keyring is None or keyring.path is None:
        return None
    try:
        status = os.stat(keyring.path)
    except OSError:
        return None
    return status.st_mtime_ns, status.st_size


def _wrapping_data(run_id: UUID, master_key: str) -> bytes:
    """What a wrapped key is bound to: its run and the master key's name."""
    return b"actae data key v1|" + run_id.bytes + b"|" + master_key.encode()


def wrap(keyring: Keyring, run_id: UUID, key: bytes) -> StoredKey:
    """``key`` wrapped by the current master key, bound to ``run_id``: nonce, ciphertext."""
    current = keyring.current
    return StoredKey(current, seal(keyring.secret(current), key, _wrapping_data(run_id, current)))


def unwrap(keyring: Keyring, run_id: UUID, stored: StoredKey) -> bytes:
    """The data key in ``stored``; ``CorruptionError`` if it was altered or moved."""
    assert stored.wrapped is not None  # noqa: S101 - callers check for a forgotten key
    secret = keyring.secret(stored.master_key)
    try:
        return unseal(secret, stored.wrapped, _wrapping_data(run_id, stored.master_key))
    except InvalidTag:
        raise CorruptionError(
            f"data key of run {run_id}", "it does not open with its master key (altered?)"
        ) from None


# -- the table ----------------------------------------------------------------------------


class SqlKeyTable:
    """Wrapped data keys in ``actae_data_keys``, in the custody tables' dialect."""

    def __init__(self, tables: Tables) -> None:
        self.tables = tables

    def _rows(self, statement: str, *params: Any) -> list[tuple[Any, ...]]:
        with self.tables.connection() as conn:
            return list(self.tables.run(conn, statement, *params).fetchall())  # each has rows

    def any(self) -> bool:
        """Whether any run was ever given a key."""
        return bool(self._rows("SELECT 1 FROM {p}actae_data_keys LIMIT 1"))

    def drop(self, run_ids: Sequence[UUID]) -> int:
        """Delete the rows of these runs (purged by retention); how many."""
        statement = "DELETE FROM {p}actae_data_keys WHERE run_id = ? RETURNING run_id"
        return sum(len(self._rows(statement, str(run_id))) for run_id in run_ids)

    def present(self, run_ids: Sequence[UUID]) -> dict[UUID, bool]:
        """Which of these runs have a row, each with whether its key is live (not forgotten)."""
        found: dict[UUID, bool] = {}
        for start in range(0, len(run_ids), 500):  # SQLite's limit on parameters
            part = [str(run_id) for run_id in run_ids[start : start + 500]]
            marks = ", ".join("?" * len(part))
            where = f"WHERE run_id IN ({marks})"
            statement = "SELECT run_id, wrapped IS NOT NULL FROM {p}actae_data_keys " + where  # noqa: S608
            found.update((UUID(str(r)), bool(live)) for r, live in self._rows(statement, *part))
        return found

    def get(self, run_id: UUID) -> StoredKey | None:
        """The run's row, or ``None`` when it has none."""
        statement = "SELECT master_key, wrapped FROM {p}actae_data_keys WHERE run_id = ?"
        for master_key, wrapped in self._rows(statement, str(run_id)):
            return StoredKey(master_key, None if wrapped is None else bytes(wrapped))
        return None

    def add(self, run_id: UUID, key: StoredKey) -> StoredKey:
        """Insert ``key`` unless the run has one already; the row that is there after."""
        insert = (
            "INSERT INTO {p}actae_data_keys (run_id, master_key, wrapped) VALUES (?, ?, ?) "
            "ON CONFLICT (run_id) DO NOTHING RETURNING run_id"
        )
        self._rows(insert, str(run_id), key.master_key, key.wrapped)
        found = self.get(run_id)
        assert found is not None  # noqa: S101 - inserted or kept just now
        return found

    def destroy(self, run_id: UUID) -> bool:
        """Drop the run's wrapped key for good; whether it had one.

        A new forget token is written in the same transaction: other processes' reads bring
        it back and stop trusting their cached keys (:mod:`~actae.adapters.persistence.forgets`).
        """
        statement = (
            "UPDATE {p}actae_data_keys SET wrapped = NULL, forgotten_at = CURRENT_TIMESTAMP "
            "WHERE run_id = ? AND wrapped IS NOT NULL RETURNING run_id"
        )
        generation = (
            "INSERT INTO {p}actae_secrets (name, value) VALUES (?, ?) "
            "ON CONFLICT (name) DO UPDATE SET value = excluded.value"
        )
        run = self.tables.run
        with self.tables.transaction() as conn:
            destroyed = bool(run(conn, statement, str(run_id)).fetchall())
            if destroyed:
                run(conn, generation, TOKEN_NAME, new_token())
        return destroyed

    def stale(self, current: str, limit: int) -> list[tuple[UUID, StoredKey]]:
        """Up to ``limit`` live keys wrapped by another master key than ``current``."""
        statement = (
            "SELECT run_id, master_key, wrapped FROM {p}actae_data_keys "
            "WHERE wrapped IS NOT NULL AND master_key <> ? ORDER BY run_id LIMIT ?"
        )
        rows = self._rows(statement, current, limit)
        return [(UUID(str(r)), StoredKey(m, bytes(w))) for r, m, w in rows]

    def rewrap(self, run_id: UUID, old: StoredKey, new: StoredKey) -> bool:
        """Replace ``old`` by ``new`` if the row still holds ``old``."""
        statement = (
            "UPDATE {p}actae_data_keys SET master_key = ?, wrapped = ? "
            "WHERE run_id = ? AND master_key = ? AND wrapped = ? RETURNING run_id"
        )
        params = (new.master_key, new.wrapped, str(run_id), old.master_key, old.wrapped)
        return bool(self._rows(statement, *params))
