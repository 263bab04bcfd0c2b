"""``actae console`` as a process: it refuses to start without users, serves on loopback, and
stops on SIGTERM or Ctrl-C at once, ending the event streams that are still open."""

from __future__ import annotations

import signal
import sqlite3
import threading
import time
from pathlib import Path

import httpx
import pytest

import actae
from actae.adapters.console.auth import add_user
from actae.adapters.console.server import serve
from actae.adapters.console.state import Console
from tests.console.serving import DEADLINE, ConsoleProcess
from tests.helpers import wait_for


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    with actae.open(url) as store:
        run = store.start_run("triage-1", agent_id="triage", state={})
        store.record(run.channel_id, kind="model.call", payload={}, expected_cursor=1)
    return url


def test_serve_refuses_to_start_without_users(tmp_path: Path, store_url: str) -> None:
    with pytest.raises(actae.ValidationError, match="add-user") as missing:
        serve(store_url, port=0, auth_file=tmp_path / "absent.json")
    assert missing.value.field == "auth_file"
    with pytest.raises(actae.ValidationError, match="refuses to start without users"):
        serve(store_url, port=0, auth_file=None)  # type: ignore[arg-type]
    empty = tmp_path / "empty.json"
    empty.write_text('{"users": []}')
    with pytest.raises(actae.ValidationError, match="has no users"):
        serve(store_url, port=0, auth_file=empty)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_the_console_and_ends_open_streams(
    tmp_path: Path, store_url: str, signum: int
) -> None:
    auth_file = tmp_path / "users.json"
    token = add_user(auth_file, "victor", "viewer")
    headers = {"Authorization": f"Bearer {token}"}
    with ConsoleProcess(store_url, auth_file) as console:
        assert console.base.startswith("http://127.0.0.1:")  # loopback unless told otherwise
        runs = httpx.get(f"{console.base}/api/runs", headers=headers).json()["runs"]
        ended = threading.Event()
        first: list[str] = []

        def follow() -> None:
            path = f"{console.base}/api/runs/{runs[0]['run_id']}/stream"
            with httpx.stream("GET", path, headers=headers, timeout=DEADLINE) as response:
                for line in response.iter_lines():
                    if line.startswith("event: "):
                        first.append(line)
            ended.set()

        reader = threading.Thread(target=follow, daemon=True)
        reader.start()
        wait_for(lambda: bool(first), "the stream to open and send", DEADLINE)
        assert first == ["event: status"] or first[:1] == ["event: status"]

        started = time.monotonic()
        assert console.stop(signum) == 0
        assert time.monotonic() - started < 3  # not uvicorn's graceful wait for the stream
        assert ended.wait(DEADLINE)
    log = "\n".join(console.lines)
    assert f"stopping ({signal.Signals(signum).name})" in log
    assert "stopped" in log
    assert "Traceback" not in log


def test_a_stream_the_client_drops_is_closed_on_the_server(tmp_path: Path, store_url: str) -> None:
    auth_file = tmp_path / "users.json"
    headers = {"Authorization": f"Bearer {add_user(auth_file, 'victor', 'viewer')}"}
    with ConsoleProcess(store_url, auth_file) as console:
        run_id = httpx.get(f"{console.base}/api/runs", headers=headers).json()["runs"][0]["run_id"]

        def streams() -> str:
            text = httpx.get(f"{console.base}/metrics", headers=headers).text
            (line,) = [x for x in text.splitlines() if x.startswith("actae_console_streams ")]
            return line.split()[1]

        with httpx.stream(
            "GET", f"{console.base}/api/runs/{run_id}/stream", headers=headers
        ) as response:
            lines = response.iter_lines()  # kept: a dropped iterator closes the response
            assert next(lines) == "retry: 2000"
            assert streams() == "1.0"
        wait_for(lambda: streams() == "0.0", "the server to close the dropped stream", DEADLINE)
        assert streams() == "0.0"


def test_serve_says_why_the_console_could_not_start(
    tmp_path: Path, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    auth_file = tmp_path / "users.json"
    add_user(auth_file, "victor", "viewer")

    async def refused(self: Console) -> None:
        raise sqlite3.OperationalError("attempt to write a readonly database")

    monkeypatch.setattr(Console, "open", refused)
    with pytest.raises(actae.ActaeError, match="could not start: OperationalError: attempt to"):
        serve(store_url, port=0, auth_file=auth_file)

    async def invalid(self: Console) -> None:
        raise actae.ValidationError("db", "no read models here")

    monkeypatch.setattr(Console, "open", invalid)
    with pytest.raises(actae.ValidationError, match="no read models here"):
        serve(store_url, port=0, auth_file=auth_file)


def test_serve_refuses_an_auth_file_others_may_write(tmp_path: Path, store_url: str) -> None:
    auth_file = tmp_path / "users.json"
    add_user(auth_file, "victor", "viewer")
    auth_file.chmod(0o666)
    with pytest.raises(actae.ValidationError, match="writable by its group and others"):
        serve(store_url, port=0, auth_file=auth_file)
