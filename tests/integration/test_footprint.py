"""What an idle Actae process holds: its server connections, their names, threads and CPU.

Each command runs as a real process on a real server; its connections are found by the
process's own sockets (``/proc``), matched to ``pg_stat_activity`` by client port, so other
processes on the same server cannot be counted by mistake.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

import actae

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs /proc")

DEADLINE = 60.0
"""Seconds a process has to settle (start up, and let a pool grown at start shrink)."""
CPU_WINDOW = 10.0
"""Seconds of idleness over which a process's CPU time is measured."""
IDLE_CPU_SHARE = 0.005
"""An idle console or projector uses under half a per cent of one core."""
WORKFLOWS = "import actae\n\n@actae.workflow('idle')\ndef idle(ctx):\n    return {}\n"


def local_ports(pid: int) -> set[int]:
    """The local TCP ports of ``pid``'s sockets."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[9] in inodes:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def sessions_of(pid: int, dsn: str) -> list[str]:
    """The ``application_name`` of each server session that ``pid`` holds."""
    ports = sorted(local_ports(pid))
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT application_name FROM pg_stat_activity WHERE client_port = ANY(%s)"
            " AND client_addr IS NOT NULL",
            (ports,),
        ).fetchall()
    return sorted(str(name) for (name,) in rows)


def threads_of(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/task").iterdir()))


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def settled(condition: Callable[[], bool], what: str, process: subprocess.Popen[bytes]) -> None:
    """Wait for ``condition`` (the process still running), at most ``DEADLINE`` seconds."""
    deadline = time.monotonic() + DEADLINE
    while not condition():
        assert process.poll() is None, f"the process ended ({process.returncode})"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)  # polling another process's state, with a deadline


@pytest.fixture
def store(pg_url: str) -> str:
    with actae.open(pg_url):
        pass
    return pg_url


@pytest.fixture
def started(tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    processes: list[subprocess.Popen[bytes]] = []

    def start(*args: str) -> subprocess.Popen[bytes]:
        with (tmp_path / "log").open("ab") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "actae.adapters.cli", *args],
                stdout=subprocess.DEVNULL,
                stderr=log,
                cwd=tmp_path,
            )
        processes.append(process)
        return process

    yield start
    for process in processes:
        process.terminate()
        process.wait(DEADLINE)


@pytest.mark.parametrize(
    ("concurrency", "connections", "threads"),
    [
        (1, 1, 4),  # events, read models, leases and the clock on one pooled connection
        # and an ``AsyncWorker``'s coroutines' statements on the async pool's one, its
        # passes over the read models on a store thread (a lock wait never holds the loop)
        (4, 2, 5),
    ],
)
def test_an_idle_worker_holds_few_named_connections_and_threads(
    store: str,
    pg_dsn: str,
    started: Callable[..., subprocess.Popen[bytes]],
    tmp_path: Path,
    concurrency: int,
    connections: int,
    threads: int,
) -> None:
    (tmp_path / "idle_workflows.py").write_text(WORKFLOWS)
    name = f"fp-{uuid.uuid4().hex[:8]}"
    worker = started(
        "worker",
        "--db",
        store,
        "--import",
        "idle_workflows.py",
        "--name",
        name,
        "--concurrency",
        str(concurrency),
    )
    settled(lambda: bool(sessions_of(worker.pid, pg_dsn)), "the worker to connect", worker)
    enough = lambda: len(sessions_of(worker.pid, pg_dsn)) <= connections  # noqa: E731
    settled(enough, f"{connections} connections", worker)
    assert set(sessions_of(worker.pid, pg_dsn)) == {f"actae-worker:{name}"}
    assert threads_of(worker.pid) <= threads


@pytest.mark.parametrize(
    ("command", "application_name", "ready", "connections"),
    [
        (("project",), "actae-projector", "caught up", 1),
        (("console",), "actae-console", "serving http://", 2),  # the async pool's one too
    ],
)
def test_an_idle_projector_or_console_names_its_connections_and_uses_little_cpu(
    store: str,
    pg_dsn: str,
    started: Callable[..., subprocess.Popen[bytes]],
    tmp_path: Path,
    command: tuple[str, ...],
    application_name: str,
    ready: str,
    connections: int,
) -> None:
    extra: tuple[str, ...] = ()
    if command[0] == "console":
        auth = tmp_path / "auth.json"
        adding = ("console", "add-user", "a", "--role", "viewer", "--auth-file", str(auth))
        subprocess.run(
            [sys.executable, "-m", "actae.adapters.cli", *adding],
            check=True,
            capture_output=True,
        )
        with socket.socket() as probe:  # a free port
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        extra = ("--auth-file", str(auth), "--port", str(port))
    process = started(command[0], "--db", store, *command[1:], *extra)
    log = tmp_path / "log"
    settled(lambda: ready in log.read_text(), f"{ready!r} in its log", process)
    settled(lambda: bool(sessions_of(process.pid, pg_dsn)), "it to connect", process)
    shrunk = lambda: len(sessions_of(process.pid, pg_dsn)) <= connections  # noqa: E731
    settled(shrunk, "its pools to shrink", process)
    assert set(sessions_of(process.pid, pg_dsn)) == {application_name}
    before, since = cpu_seconds(process.pid), time.monotonic()
    time.sleep(CPU_WINDOW)  # the measurement itself: CPU time over a window of idleness
    used = (cpu_seconds(process.pid) - before) / (time.monotonic() - since)
    assert used < IDLE_CPU_SHARE, f"{used:.2%} of a core while idle"
