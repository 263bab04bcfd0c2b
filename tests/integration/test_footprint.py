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
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

import actae
from tests.conftest import with_schema
from tests.helpers import local_ports

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs /proc")

DEADLINE = 60.0
"""Seconds a process has to settle (start up, and let a pool grown at start shrink)."""
CPU_WINDOW = 10.0
"""Seconds of idleness over which a process's CPU time is measured."""
IDLE_CPU_SHARE = 0.005
"""An idle console or projector uses under half a per cent of one core."""
CLI = "actae.adapters.cli"
WORKFLOWS = "import actae\n\n@actae.workflow('idle')\ndef idle(ctx):\n    return {}\n"


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


WORKERS = {1: (1, 4), 4: (2, 5)}
"""An idle worker's ``--concurrency`` → the connections and threads it may hold at most: with
one, events, read models, leases and the clock share one pooled connection; with four, an
``AsyncWorker``'s coroutines' statements use the async pool's one too, and its passes over
the read models run on a store thread (a lock wait never holds the loop)."""
WORKER_NAMES = {n: f"fp-{n}-{uuid.uuid4().hex[:8]}" for n in WORKERS}
READERS = {
    "project": ("actae-projector", "caught up", 1),
    "console": ("actae-console", "serving http://", 2),  # the async pool's one too
}
"""An idle reader's command → its ``application_name``, the log line that says it is ready,
and the connections it may hold at most."""


@dataclass
class Idle:
    """A process started on a store of its own, and the log its standard error goes to."""

    process: subprocess.Popen[bytes]
    log: Path
    reader: IdleReader | None = None
    """For a reader (``READERS``): its measurement, under way from the start."""


class IdleReader(threading.Thread):
    """Waits for a reader to settle, then measures its CPU share over ``CPU_WINDOW`` seconds.

    One per reader, started with the processes: the readers settle and are measured while
    the worker tests wait on their workers, not one after another.
    """

    def __init__(self, command: str, idle: Idle, dsn: str) -> None:
        super().__init__(name=f"idle-{command}", daemon=True)
        self.command, self.idle, self.dsn = command, idle, dsn
        self.sessions: set[str] = set()
        self.share = 0.0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            _, ready, connections = READERS[self.command]
            process, log = self.idle.process, self.idle.log
            settled(lambda: ready in log.read_text(), f"{ready!r} in its log", process)
            settled(lambda: bool(sessions_of(process.pid, self.dsn)), "it to connect", process)
            shrunk = lambda: len(sessions_of(process.pid, self.dsn)) <= connections  # noqa: E731
            settled(shrunk, "its pools to shrink", process)
            self.sessions = set(sessions_of(process.pid, self.dsn))
            before, since = cpu_seconds(process.pid), time.monotonic()
            time.sleep(CPU_WINDOW)  # the measurement itself: CPU time over a window of idleness
            self.share = (cpu_seconds(process.pid) - before) / (time.monotonic() - since)
        except BaseException as error:  # raised again by the test that reads this one
            self.error = error

    def measured(self) -> tuple[set[str], float]:
        """The reader's sessions' names once it settled, and its CPU share while idle."""
        self.join(3 * DEADLINE + CPU_WINDOW)
        assert not self.is_alive(), f"the {self.command} measurement did not end"
        if self.error is not None:
            raise self.error
        return self.sessions, self.share


@pytest.fixture(scope="module")
def idle(pg_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Idle]]:
    """Every process these tests look at, started at once so that their settling overlaps.

    Each has a store (a schema) of its own, so none wakes another; all are stopped and the
    schemas dropped at the end of the module.
    """
    folder = tmp_path_factory.mktemp("footprint")
    (folder / "idle_workflows.py").write_text(WORKFLOWS)
    auth = folder / "auth.json"
    adding = ("console", "add-user", "a", "--role", "viewer", "--auth-file", str(auth))
    subprocess.run([sys.executable, "-m", CLI, *adding], check=True, capture_output=True)
    with socket.socket() as probe:  # a free port
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    commands = {
        **{
            f"worker-{n}": (
                "worker",
                "--import",
                "idle_workflows.py",
                "--name",
                WORKER_NAMES[n],
                "--concurrency",
                str(n),
            )
            for n in WORKERS
        },
        "project": ("project",),
        "console": ("console", "--auth-file", str(auth), "--port", str(port)),
    }
    schemas: list[str] = []
    started: dict[str, Idle] = {}
    try:
        for name, (verb, *options) in commands.items():
            schemas.append(f"test_fp_{uuid.uuid4().hex[:12]}")
            url = with_schema(pg_dsn, schemas[-1])
            with actae.open(url):
                pass  # the schema exists before the process starts
            log = folder / f"{name}.log"
            with log.open("ab") as err:
                process = subprocess.Popen(
                    [sys.executable, "-m", CLI, verb, "--db", url, *options],
                    stdout=subprocess.DEVNULL,
                    stderr=err,
                    cwd=folder,
                )
            started[name] = Idle(process, log)
        for command in READERS:
            reader = IdleReader(command, started[command], pg_dsn)
            started[command].reader = reader
            reader.start()
        yield started
    finally:
        try:
            for each in started.values():
                each.process.terminate()
            for each in started.values():
                try:
                    each.process.wait(DEADLINE)
                except subprocess.TimeoutExpired:
                    each.process.kill()
                    each.process.wait()
        finally:
            with psycopg.connect(pg_dsn, autocommit=True) as conn:
                for schema in schemas:
                    drop = sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE")
                    conn.execute(drop.format(sql.Identifier(schema)))


@pytest.mark.parametrize("concurrency", sorted(WORKERS))
def test_an_idle_worker_holds_few_named_connections_and_threads(
    idle: dict[str, Idle], pg_dsn: str, concurrency: int
) -> None:
    connections, threads = WORKERS[concurrency]
    worker = idle[f"worker-{concurrency}"].process
    settled(lambda: bool(sessions_of(worker.pid, pg_dsn)), "the worker to connect", worker)
    enough = lambda: len(sessions_of(worker.pid, pg_dsn)) <= connections  # noqa: E731
    settled(enough, f"{connections} connections", worker)
    assert set(sessions_of(worker.pid, pg_dsn)) == {f"actae-worker:{WORKER_NAMES[concurrency]}"}
    assert threads_of(worker.pid) <= threads


@pytest.mark.parametrize("command", sorted(READERS))
def test_an_idle_projector_or_console_names_its_connections_and_uses_little_cpu(
    idle: dict[str, Idle], command: str
) -> None:
    reader = idle[command].reader
    assert reader is not None
    sessions, used = reader.measured()

    assert sessions == {READERS[command][0]}
    assert used < IDLE_CPU_SHARE, f"{used:.2%} of a core while idle"
