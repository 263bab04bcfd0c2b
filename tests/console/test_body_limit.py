"""Request bodies are capped before authentication (``actae console --max-body``).

Against a real ``actae console`` process, over raw sockets so the test controls what is sent
and when: a ``Content-Length`` over the cap gets ``413`` before a byte of the body is sent; a
chunked body gets ``413`` once it passes the cap while the client still holds the rest; and
the process does not grow by what the clients tried to send. A bad ``--max-body`` is one line,
exit status 2.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import actae
from actae.adapters.console.auth import add_user
from tests.console.serving import DEADLINE, ConsoleProcess
from tests.helpers import actae_cli

CAP = 64 * 1024
BIG = 100 * 1024 * 1024
"""What a hostile client tries to send: the console must not hold it."""
STARTUP = 120.0
"""Seconds the console may take to start: importing its stack is slow on a loaded machine."""


@pytest.fixture(scope="module")
def store_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('store') / 'runs.db'}"
    with actae.open(url) as store:
        store.start_run("triage-1", agent_id="triage", state={})
    return url


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory, store_url: str) -> Iterator[ConsoleProcess]:
    """One console for the module (starting a process is the slow part on a loaded machine)."""
    auth_file = tmp_path_factory.mktemp("auth") / "users.json"
    add_user(auth_file, "olive", "operator")
    starting = ConsoleProcess(store_url, auth_file, "--max-body", str(CAP))
    starting.wait_for("serving http://", STARTUP)
    with starting as running:
        yield running


def connect(console: ConsoleProcess) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", console.port), timeout=DEADLINE)
    sock.settimeout(DEADLINE)
    return sock


def head(path: str, *headers: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", *headers, "", ""]
    return "\r\n".join(lines).encode()


def answer(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """The status, headers and body of one response (read until the body is complete)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"the console closed without answering: {data!r}"
        data += chunk
    top, _, body = data.partition(b"\r\n\r\n")
    status_line, *header_lines = top.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines)}
    while len(body) < int(headers.get("content-length", "0")):
        chunk = sock.recv(65536)
        assert chunk
        body += chunk
    return int(status_line.split()[1]), headers, body


def assert_too_large(status: int, headers: dict[str, str], body: bytes) -> None:
    assert status == 413, (status, body)
    assert headers["content-type"] == "application/json"
    error = json.loads(body)["error"]
    assert error["code"] == "payload_too_large"
    assert error["max_body"] == CAP
    assert "--max-body" in error["message"]
    assert "default-src 'self'" in headers["content-security-policy"]


def rss(pid: int) -> int:
    """The process's resident memory, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_a_declared_length_over_the_cap_is_refused_before_the_body_is_sent(
    console: ConsoleProcess,
) -> None:
    with connect(console) as sock:
        sock.sendall(head("/api/runs/x/cancel", f"Content-Length: {BIG}"))  # and no body
        assert_too_large(*answer(sock))


def test_a_chunked_body_is_refused_once_it_passes_the_cap_while_the_rest_is_held(
    console: ConsoleProcess,
) -> None:
    with connect(console) as sock:
        sock.sendall(head("/login", "Transfer-Encoding: chunked"))
        over = CAP + 1
        sock.sendall(f"{over:x}\r\n".encode() + b"x" * over + b"\r\n")  # then nothing more
        assert_too_large(*answer(sock))


def test_a_body_under_the_cap_is_served_as_before(console: ConsoleProcess) -> None:
    refused = httpx.post(f"{console.base}/api/runs/x/cancel", json={"reason": "r" * 100})
    assert refused.status_code == 401  # authentication still answers what it should
    chunks = (part for part in [b'{"reason": ', b'"r"}'])
    streamed = httpx.post(f"{console.base}/api/runs/x/cancel", content=chunks)
    assert streamed.status_code == 401


def send_until_closed(console: ConsoleProcess, chunked: bool) -> int:
    """Try to send a :data:`BIG` body without credentials; the bytes the socket took."""
    framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {BIG}"
    block = b"x" * (1024 * 1024)
    piece = f"{len(block):x}\r\n".encode() + block + b"\r\n" if chunked else block
    sent = 0
    with connect(console) as sock:
        sock.sendall(head("/api/runs/x/cancel", framing))
        try:
            while sent < BIG:
                sock.sendall(piece)
                sent += len(block)
        except (BrokenPipeError, ConnectionResetError):
            pass
    return sent


def test_hostile_bodies_do_not_grow_the_console(console: ConsoleProcess) -> None:
    before = rss(console.process.pid)

    sent = [send_until_closed(console, chunked) for chunked in (False, True, False, True)]

    assert all(total < BIG for total in sent), sent  # the console stopped reading each
    assert rss(console.process.pid) - before < 32 * 1024 * 1024
    assert httpx.get(f"{console.base}/login").status_code == 200  # and still serves


@pytest.mark.parametrize("value", ["0", "-1", "lots", "1.5"])
def test_a_bad_max_body_is_one_line_and_exit_status_2(
    tmp_path: Path, store_url: str, value: str
) -> None:
    auth_file = tmp_path / "users.json"
    add_user(auth_file, "olive", "operator")
    # The CLI's main in this process (tests/integration/test_cli_errors.py runs the real
    # command for the one-line, status-2 contract); the option's refusal is what counts here.
    options = ["--auth-file", str(auth_file), "--port", "1", "--max-body", value]
    done = actae_cli("console", "--db", store_url, *options)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "--max-body" in done.stderr
    assert "is not" in done.stderr  # what was expected: a whole number of bytes, at least 1


def test_the_default_cap_is_one_mebibyte() -> None:
    from actae.adapters.cli.console import MAX_BODY as CLI_DEFAULT
    from actae.adapters.console.limits import MAX_BODY

    assert MAX_BODY == CLI_DEFAULT == 1048576
