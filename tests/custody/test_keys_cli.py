"""``actae keys new`` and ``actae keys rotate`` from the command line."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

import actae
from actae.adapters.cli.main import main
from actae.adapters.custody.keyring import load_keyring
from tests.custody.sealed import MARKER, with_option


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run ``actae ARGS``: its exit status, stdout and stderr."""
    status = main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_new_writes_a_private_keyring_and_never_overwrites_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "keys.json"
    status, printed, _ = cli(capsys, "keys", "new", "--out", str(out), "--json")
    assert status == 0
    keyring = load_keyring(out)
    assert json.loads(printed) == {"keyring": str(out), "current": keyring.current}
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    before = out.read_bytes()
    status, printed, error = cli(capsys, "keys", "new", "--out", str(out))
    assert status == 2
    assert len(error.strip().splitlines()) == 1
    assert "never overwritten" in error
    assert out.read_bytes() == before


def test_rotate_rewraps_the_store_under_a_new_current_key(
    durable_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = tmp_path / "keys.json"
    assert cli(capsys, "keys", "new", "--out", str(keys))[0] == 0
    first = load_keyring(keys).current
    with actae.open(durable_url, keyring=str(keys)) as store:
        runs = [store.start_run(f"wf-{n}", agent_id="a", state={"s": MARKER}) for n in range(2)]
    status, printed, _ = cli(
        capsys, "keys", "rotate", "--keyring", str(keys), "--db", durable_url, "--json"
    )
    assert status == 0
    report = json.loads(printed)
    rotated = load_keyring(keys)
    assert report == {"keyring": str(keys), "current": rotated.current, "rewrapped": 2}
    assert rotated.current != first
    assert set(rotated.secrets) == {first, rotated.current}
    with actae.open(with_option(durable_url, "keyring", str(keys))) as store:
        assert [store.state_at(r.channel_id).state for r in runs] == [{"s": MARKER}] * 2


def test_rotate_refuses_a_keyring_that_does_not_open_the_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    status, _, error = cli(
        capsys, "keys", "rotate", "--keyring", str(tmp_path / "no.json"), "--db", url
    )
    assert status == 2
    assert len(error.strip().splitlines()) == 1
    assert "no keyring file" in error


def test_forget_from_the_command_line_is_audited(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = tmp_path / "keys.json"
    assert cli(capsys, "keys", "new", "--out", str(keys))[0] == 0
    url = with_option(f"sqlite:///{tmp_path / 'store.db'}", "keyring", str(keys))
    with actae.open(url) as store:
        run = store.start_run("wf", agent_id="a", state={"s": MARKER})
    prefix = str(run.run_id)[:8]
    status, printed, error = cli(
        capsys, "forget", prefix, "--as", "dpo", "--reason", "erasure", "--db", url, "--json"
    )
    assert status == 0, error
    assert json.loads(printed)["status"] == "forgotten"
    status, printed, _ = cli(capsys, "audit", prefix, "--db", url, "--json")
    assert [(row["action"], row["actor"]) for row in json.loads(printed)] == [("forget", "dpo")]
