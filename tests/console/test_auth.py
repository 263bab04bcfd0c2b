"""The auth file: made by ``add_user``, holding token hashes only, written whole, owner-only."""

from __future__ import annotations

import hashlib
import stat
from pathlib import Path

import orjson
import pytest

import actae
from actae.adapters.console.auth import add_user, load_users


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
    assert [p.name for p in tmp_path.iterdir()] == ["users.json"]  # no temporary left behind


def test_add_user_again_replaces_the_token_and_keeps_the_others(tmp_path: Path) -> None:
    auth_file = tmp_path / "users.json"
    old = add_user(auth_file, "alice", "operator")
    victor = add_user(auth_file, "victor", "viewer")
    new = add_user(auth_file, "alice", "viewer")

    users = load_users(auth_file)
    assert len(users) == 2
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
