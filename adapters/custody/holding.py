"""What a store holds its agents' data with: keys, the sealing mapper, artifacts.

The mappers exist before the schema is migrated; :meth:`Holding.prepare` makes what needs
the custody tables.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from actae.adapters.custody.artifacts import Artifacts, RefKeys
from actae.adapters.custody.blobs import BlobStore
from actae.adapters.custody.datakeys import DataKeys, SqlKeyTable, SqlTable
from actae.adapters.custody.keyring import KEY_BYTES, Keyring, load_keyring
from actae.adapters.custody.refs import RefRecorder
from actae.adapters.custody.sealing import SealingMapper
from actae.adapters.persistence.forgets import ForgetWatch
from actae.adapters.persistence.url import StoreUrl
from actae.domain.artifacts import ArtifactRef
from actae.domain.errors import ValidationError

Custody = Callable[[str | None], tuple[BlobStore, RefRecorder]]
"""Makes the artifacts' blob store (where the URL's ``artifacts`` says) and references."""

STORE_KEY = "store"
"""The id of the store's own reference key, used when there is no keyring."""
REFERENCE_SECRET = "artifact-references"  # noqa: S105 - a name, not a secret
"""The name, in ``actae_secrets``, of the store's own key for artifact references."""


class Holding:
    """A store's keys, the mappers that use them, and its artifacts."""

    def __init__(
        self, url: StoreUrl, keys: DataKeys, secrets: SecretTable, custody: Custody
    ) -> None:
        self.url = url
        self.keys = keys
        self.secrets = secrets
        self._custody = custody
        self.mapper = SealingMapper(keys, inline_max=url.inline_max)
        """Seals and opens contents: commands, queries, subscriptions."""
        self.metadata_mapper = self.mapper.without_contents()
        """Opens nothing: what the read models are projected from."""
        self._artifacts: Artifacts | None = None

    @property
    def artifacts(self) -> Artifacts:
        """The store's artifacts (after :meth:`prepare`)."""
        assert self._artifacts is not None  # noqa: S101 - prepared by Store.__init__
        return self._artifacts

    def prepare(self) -> None:
        """Make what needs the custody tables, once the schema is migrated."""
        self.keys.prepare()
        secrets = {STORE_KEY: self.secrets.get_or_make(REFERENCE_SECRET)}
        keyring = self.keys.keyring
        current = STORE_KEY
        if keyring is not None:
            secrets |= {key: keyring.reference_key(key) for key in keyring.secrets}
            current = keyring.current
        blobs, refs = self._custody(self.url.artifacts)
        self._artifacts = Artifacts(blobs, refs, RefKeys(current, secrets))
        self.mapper.offloader = self._artifacts
        self.metadata_mapper.offloader = self._artifacts

    def data_key_for_reading(self, ref: ArtifactRef) -> bytes | None:
        """The key that opens ``ref``'s bytes (``None`` for clear ones).

        Asked of the key table, not the cache: no event read brings the forget token back.
        """
        return self.keys.for_read(ref.run_id, fresh=True) if ref.sealed else None

    def close(self) -> None:
        """Release the artifacts' connections."""
        if self._artifacts is not None:
            self._artifacts.close()


class SecretTable(SqlTable):
    """Secrets the store makes for itself, in ``actae_secrets``."""

    def get_or_make(self, name: str) -> bytes:
        """The secret ``name``; 32 random bytes made now if the store has none yet."""
        insert = "INSERT INTO {table} (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING"
        self._rows(insert + " RETURNING name", name, os.urandom(KEY_BYTES))
        ((value,),) = self._rows("SELECT value FROM {table} WHERE name = ?", name)
        return bytes(value)


def keyring_of(url: StoreUrl, keyring: str | None) -> Keyring | None:
    """The keyring named by ``actae.open(keyring=)`` or the URL's ``?keyring=`` (not both)."""
    if keyring is not None and url.keyring is not None and keyring != url.keyring:
        raise ValidationError("keyring", "given both as an argument and in the URL; give one")
    path = keyring if keyring is not None else url.keyring
    if path is not None and not isinstance(path, str | os.PathLike):
        raise ValidationError("keyring", f"expected a file path, got {type(path).__name__}")
    return None if path is None else load_keyring(path)


def holding_for(
    url: StoreUrl,
    keyring: Keyring | None,
    tables: tuple[SqlKeyTable, SecretTable],
    watch: ForgetWatch,
    custody: Custody,
) -> Holding:
    """Keys and secrets in ``tables``, forgets as ``watch`` saw them, artifacts by ``custody``."""
    keys, secrets = tables
    return Holding(url, DataKeys(keys, keyring, watch), secrets, custody)
