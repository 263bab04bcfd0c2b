"""The auth file: made by ``add_user``, holding token hashes only, written whole, owner-only,
under a lock, through a symlink; refused when others may write it."""

from __future__ import annotations

import fcntl
import hashlib
import socket
import stat
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson
import pytest

import actae
from actae.adapters.console import auth
from actae.adapters.console.auth import add_user, load_users, lock_file


def test_add_user_stores_only_the_hash_of_the_token_it_returns(tmp_path: Path) -> None:
    auth_file = tmp_path / "users.json"
    token = add_user(auth_file, "alice", "operator")

    assert len(token) >= 43  # 32 random bytes, URL-safe
    assert stat.S_IMODE(auth_file.stat().st_mode) == 0o600
    assert token not in auth_file.read_text()
    assert orjson.loads(auth_file.read_bytes()) == {
        "users": [
            {
                "name": "alice",
                "role": "operator",
                "token_sha256": hashlib.sha256(token.encode()).hexdigest(),
            }
        ]
    }
    user = load_users(auth_file).find(token)
    assert user is not None
    assert (user.name, user.role, user.may_act) == ("alice", "operator", True)
    assert load_users(auth_file).find(token + "x") is None
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == [".users.json.lock", "users.json"]  # the lock file stays, no temporary does


def test_add_user_again_replaces_the_token_and_keeps_the_others(tmp_path: Path) -> None:
    auth_file = tmp_path / "users.json"
    old = add_user(auth_file, "alice", "operator")
    victor = add_user(auth_file, "victor", "viewer")
    new = add_user(auth_file, "alice", "viewer")

    users = load_users(auth_file)
    assert len(users.entries) == 2
    assert users.find(old) is None
    found = users.find(new)
    assert found is not None
    assert (found.name, found.may_act) == ("alice", False)
    assert users.find(victor) is not None


@pytest.mark.parametrize(
    ("name", "role", "field"),
    [("alice", "admin", "role"), ("", "viewer", "name"), ("  ", "viewer", "name")],
)
def test_add_user_refuses_a_bad_role_or_name(
    tmp_path: Path, name: str, role: str, field: str
) -> None:
    with pytest.raises(actae.ValidationError) as refused:
        add_user(tmp_path / "users.json", name, role)
    assert refused.value.field == field
    assert not (tmp_path / "users.json").exists()


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("not json", "cannot be read as JSON"),
        ('{"people": []}', 'expected {"users"'),
        ('{"users": [{"name": "a", "role": "root", "token_sha256": "' + "0" * 64 + '"}]}', "role"),
        ('{"users": [{"name": "a", "role": "viewer", "token_sha256": "abc"}]}', "token_sha256"),
    ],
)
def test_a_malformed_auth_file_is_refused_and_left_alone(
    tmp_path: Path, content: str, problem: str
) -> None:
    auth_file = tmp_path / "users.json"
    auth_file.write_text(content)
    with pytest.raises(actae.ValidationError, match=problem):
        load_users(auth_file)
    with pytest.raises(actae.ValidationError, match=problem):
        add_user(auth_file, "alice", "operator")
    assert auth_file.read_text() == content


@pytest.mark.parametrize("mode", [0o620, 0o602, 0o666], ids=["group", "others", "both"])
def test_an_auth_file_others_may_write_is_refused(tmp_path: Path, mode: int) -> None:
    auth_file = tmp_path / "users.json"
    add_user(auth_file, "alice", "operator")
    auth_file.chmod(mode)
    with pytest.raises(actae.ValidationError, match="chmod 600") as refused:
        load_users(auth_file)
    assert refused.value.field == "auth_file"
    assert f"mode {mode:04o}" in str(refused.value)
    auth_file.chmod(0o640)  # readable by a group is fine: it holds hashes only
    assert len(load_users(auth_file).entries) == 1


def test_add_user_to_a_folder_that_does_not_exist_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(actae.ValidationError, match="cannot be written") as refused:
        add_user(tmp_path / "nodir" / "users.json", "alice", "operator")
    assert refused.value.field == "auth_file"
    assert "No such file or directory" in str(refused.value)


def test_add_user_reads_and_writes_under_an_exclusive_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    auth_file = tmp_path / "users.json"
    add_user(auth_file, "alice", "operator")
    seen: list[str] = []

    def taken_elsewhere() -> bool:
        """Whether another opener of the lock file (another process) would have to wait."""
        with open(lock_file(auth_file), "a") as other:
            try:
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(other, fcntl.LOCK_UN)
            return False

    def watched(real: Callable[..., Any], name: str) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            seen.append(f"{name} {'locked' if taken_elsewhere() else 'UNLOCKED'}")
            return real(*args)

        return call

    monkeypatch.setattr(auth, "_entries", watched(auth._entries, "read"))
    monkeypatch.setattr(auth, "_write_atomically", watched(auth._write_atomically, "write"))
    add_user(auth_file, "victor", "viewer")
    assert seen == ["read locked", "write locked"]
    assert not taken_elsewhere()  # released


def test_users_added_at_once_are_all_kept(tmp_path: Path) -> None:
    auth_file = tmp_path / "users.json"
    names = [f"user{number}" for number in range(8)]
    start = threading.Barrier(len(names))

    def add(name: str) -> str:
        start.wait(10)
        return add_user(auth_file, name, "viewer")

    with ThreadPoolExecutor(len(names)) as pool:
        tokens = list(pool.map(add, names))
    users = load_users(auth_file)
    assert sorted(u.name for token in tokens if (u := users.find(token)) is not None) == names


def test_a_symlinked_auth_file_is_written_through(tmp_path: Path) -> None:
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    link = tmp_path / "users.json"
    link.symlink_to(secrets / "console-users.json")  # dangling until the first user
    alice = add_user(link, "alice", "operator")
    victor = add_user(link, "victor", "viewer")

    assert link.is_symlink()
    assert link.readlink() == secrets / "console-users.json"
    assert stat.S_IMODE((secrets / "console-users.json").stat().st_mode) == 0o600
    users = load_users(link)
    assert users.find(alice) is not None
    assert users.find(victor) is not None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["secrets", "users.json"]
    assert (secrets / ".console-users.json.lock").exists()  # the lock is beside the target


@pytest.mark.parametrize(
    "mode", [0o770, 0o707, 0o777, 0o1777], ids=["group", "others", "both", "sticky"]
)
def test_an_auth_file_in_a_folder_others_may_write_is_refused(tmp_path: Path, mode: int) -> None:
    folder = tmp_path / "shared"
    folder.mkdir()
    auth_file = folder / "users.json"
    add_user(auth_file, "alice", "operator")
    folder.chmod(mode)
    try:
        with pytest.raises(actae.ValidationError, match="its folder") as refused:
            load_users(auth_file)
        assert refused.value.field == "auth_file"
        assert f"mode {mode:04o}" in str(refused.value)
        assert "chmod go-w" in str(refused.value)
    finally:
        folder.chmod(0o750)  # a folder its group may read is fine
    assert len(load_users(auth_file).entries) == 1


def test_an_auth_file_below_a_folder_others_may_write_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    private = shared / "private"
    private.mkdir(parents=True, mode=0o700)
    auth_file = private / "users.json"
    add_user(auth_file, "alice", "operator")
    shared.chmod(0o777)  # not sticky: anyone may rename "private" and put their own there
    try:
        with pytest.raises(actae.ValidationError, match="above it") as refused:
            load_users(auth_file)
        assert refused.value.field == "auth_file"
        assert f"chmod go-w {shared}" in str(refused.value)
        shared.chmod(0o1777)  # sticky, as /tmp: only an entry's owner may rename it
        assert len(load_users(auth_file).entries) == 1
    finally:
        shared.chmod(0o755)


def test_a_symlinked_auth_file_whose_target_folder_others_may_write_is_refused(
    tmp_path: Path,
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    link = tmp_path / "users.json"
    link.symlink_to(shared / "console-users.json")
    add_user(link, "alice", "operator")
    shared.chmod(0o777)
    try:
        with pytest.raises(actae.ValidationError, match=f"its folder {shared} is writable"):
            load_users(link)
    finally:
        shared.chmod(0o700)
    assert len(load_users(link).entries) == 1


def test_the_console_refuses_a_shared_folder_in_one_line_with_exit_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from actae.adapters.cli.main import main

    url = f"sqlite:///{tmp_path / 'runs.db'}"
    actae.open(url).close()
    shared = tmp_path / "shared"
    shared.mkdir()
    add_user(shared / "users.json", "alice", "operator")
    shared.chmod(0o777)
    with socket.socket() as taken:  # were the folder let through, serving would stop here
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        try:
            code = main(
                ["console", "--db", url, "--port", port, "--auth-file", str(shared / "users.json")]
            )
        finally:
            shared.chmod(0o700)
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1, err
    assert "its folder" in err
