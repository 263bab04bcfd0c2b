"""Who may use the console: the auth file of users, roles and token hashes (docs/console.md).

Whoever can write or replace the file can make themselves an operator, so ``load_users``
refuses a file others may write.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import os
import re
import secrets
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from actae.domain.errors import ValidationError
from actae.domain.validation import require_text

VIEWER = "viewer"
OPERATOR = "operator"
ROLES = (VIEWER, OPERATOR)
NO_USERS = (
    "the console refuses to start without users; make one with "
    "`actae console add-user NAME --role operator --auth-file FILE`"
)
SHARED_WRITE = stat.S_IWGRP | stat.S_IWOTH  # others than the owner (and root) may write


@dataclass(frozen=True)
class User:
    """A person (or a scraper) the console knows; a viewer reads, an operator also acts."""

    name: str
    role: str

    @property
    def may_act(self) -> bool:
        """Whether this user may change anything (an operator)."""
        return self.role == OPERATOR


def token_hash(token: str) -> str:
    """The hex SHA-256 the auth file keeps (tokens are 256 random bits: nothing to guess)."""
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class Users:
    """The users of an auth file, by the hash of their token."""

    entries: tuple[tuple[User, str], ...]

    def find(self, token: str) -> User | None:
        """The user whose token is ``token``, else ``None`` (compared in constant time)."""
        presented = token_hash(token)
        found = None
        for user, expected in self.entries:  # every entry is compared: no early exit
            if hmac.compare_digest(presented, expected):
                found = user
        return found


def _problem(path: Path, reason: str) -> ValidationError:
    return ValidationError("auth_file", f"{path}: {reason}")


def _entries(path: Path) -> list[dict[str, Any]]:
    """The file's user entries, checked (``[]`` when the file does not exist)."""
    try:
        document = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return []
    except (OSError, orjson.JSONDecodeError) as error:
        raise _problem(path, f"cannot be read as JSON ({error})") from None
    users = document.get("users") if isinstance(document, dict) else None
    if not isinstance(users, list):
        raise _problem(path, 'expected {"users": [...]}')
    for number, entry in enumerate(users, 1):
        if not isinstance(entry, dict):
            raise _problem(path, f"user {number} is not an object")
        name, role, digest = entry.get("name"), entry.get("role"), entry.get("token_sha256")
        if not isinstance(name, str) or not name.strip():
            raise _problem(path, f"user {number} has no name")
        if role not in ROLES:
            raise _problem(path, f"user {name!r} has role {role!r}; expected one of {ROLES}")
        if not isinstance(digest, str) or not re.fullmatch(r"[0-9a-fA-F]{64}", digest):
            raise _problem(path, f"user {name!r} has no token_sha256 (64 hex digits)")
    return users


def load_users(path: Path) -> Users:
    """The users of the auth file at ``path``; a missing, malformed or empty file is refused."""
    if not path.is_file():
        raise _problem(
            path,
            "no such file; make it with `actae console add-user NAME --role operator "
            f"--auth-file {path}`",
        )
    why = "whoever can write it can make themselves an operator"
    _refuse_writable(path, path, "is", why, "chmod 600")
    for folder in sorted({path.absolute().parent, Path(os.path.realpath(path)).parent}):
        why = "whoever can write the folder can replace the file and make themselves an operator"
        _refuse_writable(path, folder, f"its folder {folder} is", why, "chmod go-w")
        why = "whoever can write it can move the auth file's folder aside and put their own there"
        for ancestor in folder.parents:  # one with the sticky bit is fine: no rename by others
            what = f"the folder {ancestor} above it is"
            _refuse_writable(path, ancestor, what, why, "chmod go-w", sticky_ok=True)
    entries = _entries(path)
    if not entries:
        raise _problem(path, "has no users; add one with `actae console add-user`")
    return Users(
        tuple(
            (User(str(entry["name"]), str(entry["role"])), str(entry["token_sha256"]).lower())
            for entry in entries
        )
    )


def _refuse_writable(
    path: Path, place: Path, what: str, why: str, fix: str, *, sticky_ok: bool = False
) -> None:
    """Refuse ``path`` if others than the owner may write ``place`` (it, or a folder)."""
    mode = stat.S_IMODE(place.stat().st_mode)
    if mode & SHARED_WRITE and not (sticky_ok and mode & stat.S_ISVTX):
        bits = ((stat.S_IWGRP, "its group"), (stat.S_IWOTH, "others"))
        writers = " and ".join(name for bit, name in bits if mode & bit)
        message = f"{what} writable by {writers} (mode {mode:04o}): {why}; `{fix} {place}`"
        raise _problem(path, message)


def add_user(auth_file: Path, name: str, role: str) -> str:
    """Add ``name`` with ``role`` to ``auth_file`` (or give them a new token); the token, once."""
    name = require_text("name", name.strip() if isinstance(name, str) else name)
    if role not in ROLES:
        raise ValidationError("role", f"expected one of {', '.join(ROLES)}, got {role!r}")
    target = Path(os.path.realpath(auth_file)) if auth_file.is_symlink() else auth_file
    token = secrets.token_urlsafe(32)
    try:
        with _locked(target):
            entries = [entry for entry in _entries(target) if entry["name"] != name]
            entries.append({"name": name, "role": role, "token_sha256": token_hash(token)})
            _write_atomically(target, orjson.dumps({"users": entries}, option=orjson.OPT_INDENT_2))
    except OSError as error:
        raise _problem(auth_file, f"cannot be written ({error.strerror or error})") from None
    return token


def lock_file(path: Path) -> Path:
    """The lock file ``add_user`` holds while it changes ``path``: ``.NAME.lock`` beside it."""
    return path.with_name(f".{path.name}.lock")


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` on :func:`lock_file` of ``path`` (kept: else two locks, two files)."""
    handle = os.open(lock_file(path), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)  # waits for another add_user to finish
        yield
    finally:
        os.close(handle)  # releases the lock


def _write_atomically(path: Path, content: bytes) -> None:
    """Replace ``path`` with ``content`` in one step, mode 0600: never half-written."""
    folder = path.parent if str(path.parent) else Path()
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=folder)  # mode 0600
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(content + b"\n")
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    with contextlib.suppress(OSError):  # make the rename durable where the OS allows it
        directory = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
