"""What a store holds its agents' data with: keys, the sealing mapper, artifacts.

The mappers exist before the schema is migrated; :meth:`Holding.prepare` makes what needs
the custody tables.
"""

from __future__ import annotations

import os

from actae.adapters.custody.artifacts import Artifacts, RefKeys
from actae.adapters.custody.blobs import blob_store
from actae.adapters.custody.datakeys import DataKeys, SqlKeyTable
from actae.adapters.custody.keyring import KEY_BYTES, Keyring, load_keyring
from actae.adapters.custody.refs import RefRecorder
from actae.adapters.custody.sealing import SealingMapper
from actae.adapters.custody.tables import Tables
from actae.adapters.persistence.forgets import ForgetWatch
from actae.adapters.persistence.url import StoreUrl
from actae.domain.artifacts import ArtifactRef
from actae.domain.errors import ValidationError

STORE_KEY = "store"
"""The id of the store's own reference key, used when there is no keyring."""
REFERENCE_SECRET = "artifact-references"  # noqa: S105 - a name, not a secret
"""The name, in ``actae_secrets``, of the store's own key for artifact references."""


class Holding:
    """A store's keys, the mappers that use them, and its artifacts, all in ``tables``."""

    def __init__(
        self, url: StoreUrl, tables: Tables, keyring: Keyring | None, watch: ForgetWatch
    ) -> None:
        self.url = url
        self.tables = tables
        self.keys = DataKeys(SqlKeyTable(tables), keyring, watch)
        self.mapper = SealingMapper(self.keys, inline_max=url.inline_max)
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
        secrets = {STORE_KEY: own_secret(self.tables, REFERENCE_SECRET)}
        keyring = self.keys.keyring
        current = STORE_KEY
        if keyring is not None:
            secrets |= {key: keyring.reference_key(key) for key in keyring.secrets}
            current = keyring.current
        blobs, refs = blob_store(self.url.artifacts, self.tables), RefRecorder(self.tables)
        self._artifacts = Artifacts(blobs, refs, RefKeys(current, secrets))
        self.mapper.offloader = self._artifacts
        self.metadata_mapper.offloader = self._artifacts

    def data_key_for_reading(self, ref: ArtifactRef) -> bytes | None:
        """The key that opens ``ref``'s bytes (``None`` for clear ones), asked of the table.

        Not of the cache: no event read brings the forget token back first.
        """
        return self.keys.for_read(ref.run_id, fresh=True) if ref.sealed else None


def own_secret(tables: Tables, name: str) -> bytes:
    """The store's secret ``name`` (``actae_secrets``); 32 random bytes made now if it has none."""
    insert = (
        "INSERT INTO {p}actae_secrets (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING"
    )
    select = "SELECT value FROM {p}actae_secrets WHERE name = ?"
    with tables.connection() as conn:
        tables.run(conn, insert, name, os.urandom(KEY_BYTES))
        ((value,),) = tables.run(conn, select, name).fetchall()
    return bytes(value)


def keyring_of(url: StoreUrl, keyring: str | None) -> Keyring | None:
    """The keyring named by ``actae.open(keyring=)`` or the URL's ``?keyring=`` (not both)."""
    if keyring is not None and url.keyring is not None and keyring != url.keyring:
        raise ValidationError("keyring", "given both as an argument and in the URL; give one")
    path = keyring if keyring is not None else url.keyring
    if path is not None and not isinstance(path, str | os.PathLike):
        raise ValidationError("keyring", f"expected a file path, got {type(path).__name__}")
    return None if path is None else load_keyring(path)
