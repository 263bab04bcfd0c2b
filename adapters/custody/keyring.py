"""The keyring: a file of named master keys, the current one wrapping new data keys.

``actae keys new --out keys.json`` writes one; ``actae keys rotate`` adds a current key and
re-wraps every data key under it. The store holds only wrapped data keys, so a copy of the
database reveals nothing without the keyring. The file is JSON, written atomically, 0600::

    {"format": "actae-keyring/1", "current": "k-20261201-3f9a",
     "keys": {"k-20261201-3f9a": {"created": "2026-12-01T10:00:00+00:00",
                                  "secret": "<32 random bytes, base64>"}}}

Keys no longer current stay: keys not yet re-wrapped and references signed still need them.
"""

from __future__ import annotations

import base64
import binascii
import os
import secrets
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from actae.domain.errors import KeyringError, ValidationError

FORMAT = "actae-keyring/1"
KEY_BYTES = 32
"""AES-256: every master key and data key is 32 random bytes."""
REFERENCE_KEY_INFO = b"actae artifact references v1"
"""HKDF's ``info`` deriving the artifact references' MAC key from a master key."""
NONCE_BYTES = 12


@dataclass(frozen=True)
class Keyring:
    """Named master keys; ``current`` wraps new data keys and signs new references."""

    current: str
    secrets: Mapping[str, bytes]
    created: Mapping[str, str]
    path: str | None = None

    def secret(self, key_id: str) -> bytes:
        """The master key ``key_id``; ``KeyringError`` names the keyring when it lacks it."""
        try:
            return self.secrets[key_id]
        except KeyError:
            where = f" {self.path}" if self.path else ""
            raise KeyringError(
                f"the keyring{where} has no master key {key_id!r}: open the store with the "
                "keyring that wrapped its data keys"
            ) from None

    def reference_key(self, key_id: str) -> bytes:
        """The MAC key for artifact references, derived from master key ``key_id``."""
        return derive(self.secret(key_id), REFERENCE_KEY_INFO)

    def with_new_key(self) -> Keyring:
        """A copy with a fresh master key added, which becomes current."""
        now = datetime.now(UTC)
        key_id = new_key_id(now)
        while key_id in self.secrets:  # two rotations in one second
            key_id = new_key_id(now)
        return Keyring(
            current=key_id,
            secrets={**self.secrets, key_id: secrets.token_bytes(KEY_BYTES)},
            created={**self.created, key_id: now.isoformat(timespec="seconds")},
            path=self.path,
        )


def derive(secret: bytes, info: bytes) -> bytes:
    """A 32-byte key for one purpose (``info``) from a master key, by HKDF-SHA256."""
    return HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=None, info=info).derive(secret)


def seal(key: bytes, plaintext: bytes, data: bytes) -> bytes:
    """AES-256-GCM under ``key``, bound to ``data``: a fresh nonce, then ciphertext and tag."""
    nonce = os.urandom(NONCE_BYTES)
    return nonce + AESGCM(key).encrypt(nonce, plaintext, data)


def unseal(key: bytes, sealed: bytes, data: bytes) -> bytes:
    """The plaintext of :func:`seal`'s output; ``InvalidTag`` if it was altered or moved."""
    return AESGCM(key).decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], data)


def new_key_id(now: datetime) -> str:
    """A readable, unique master key name: ``k-<date>-<random>``."""
    return f"k-{now:%Y%m%d}-{secrets.token_hex(3)}"


def new_keyring() -> Keyring:
    """A keyring with one fresh master key."""
    return Keyring(current="", secrets={}, created={}).with_new_key()


def load_keyring(path: str | os.PathLike[str]) -> Keyring:
    """Read the keyring at ``path``; ``ValidationError`` says what is wrong with the file."""
    where = os.fspath(path)
    try:
        document = orjson.loads(Path(where).read_bytes())
    except FileNotFoundError:
        raise ValidationError("keyring", f"no keyring file at {where}") from None
    except OSError as error:
        raise ValidationError("keyring", f"cannot read {where}: {error.strerror}") from None
    except orjson.JSONDecodeError:
        raise ValidationError("keyring", f"{where} is not a keyring (not JSON)") from None
    return _parsed(document, where)


def _parsed(document: Any, where: str) -> Keyring:
    def bad(reason: str) -> ValidationError:
        return ValidationError("keyring", f"{where}: {reason}")

    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise bad(f"not a keyring (expected format {FORMAT!r})")
    keys = document.get("keys")
    current = document.get("current")
    if not isinstance(keys, dict) or not keys:
        raise bad("it holds no keys")
    if not isinstance(current, str) or current not in keys:
        raise bad(f"its current key {current!r} is not among its keys")
    found: dict[str, bytes] = {}
    created: dict[str, str] = {}
    for key_id, entry in keys.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("secret"), str):
            raise bad(f"key {key_id!r} has no secret")
        try:
            secret = base64.b64decode(entry["secret"], validate=True)
        except (binascii.Error, ValueError):
            raise bad(f"key {key_id!r}: its secret is not base64") from None
        if len(secret) != KEY_BYTES:
            raise bad(f"key {key_id!r}: expected {KEY_BYTES} bytes, got {len(secret)}")
        found[key_id] = secret
        created[key_id] = str(entry.get("created", ""))
    return Keyring(current=current, secrets=found, created=created, path=where)


def save_keyring(keyring: Keyring, path: str | os.PathLike[str], *, replace: bool) -> None:
    """Write ``keyring`` to ``path`` atomically, readable by its owner only (0600).

    Without ``replace`` an existing file is refused: that would make its stores unreadable.
    """
    where = Path(os.fspath(path))
    if not replace and where.exists():
        raise ValidationError("out", f"{where} exists; a keyring is never overwritten")
    if not where.parent.is_dir():
        raise ValidationError("out", f"the folder {where.parent} does not exist")
    document = {
        "format": FORMAT,
        "current": keyring.current,
        "keys": {
            key_id: {
                "created": keyring.created.get(key_id, ""),
                "secret": base64.b64encode(secret).decode(),
            }
            for key_id, secret in keyring.secrets.items()
        },
    }
    handle, temporary = tempfile.mkstemp(prefix=".keyring-", dir=where.parent)
    try:
        os.fchmod(handle, 0o600)
        with os.fdopen(handle, "wb") as file:
            file.write(orjson.dumps(document, option=orjson.OPT_INDENT_2))
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, where)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
