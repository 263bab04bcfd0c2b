"""Small things many tests need: waiting on a condition, a process's sockets, a loop ticking,
following a subscription, the CLI run in this process.

Waiting is always on a condition with a deadline, never a bare sleep: a test that sleeps
either wastes time or races.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import actae
from actae.adapters.cli.main import main

T = TypeVar("T")
ACTAE = [sys.executable, "-m", "actae.adapters.cli"]
"""The ``actae`` command as a process of this interpreter."""


def wait_for(
    condition: Callable[[], object], what: str, within: float = 60.0, pause: float = 0.01
) -> None:
    """Return once ``condition()`` holds; fail naming ``what`` after ``within`` seconds."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(pause)  # polling another thread's or process's progress


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


async def ticks_while(blocked: Awaitable[T]) -> tuple[int, T]:
    """How often a 10 ms ticker ran on the loop while ``blocked`` was awaited; its result."""
    ticks = 0
    done = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not done.is_set():
            await asyncio.sleep(0.01)
            ticks += 1

    running = asyncio.create_task(ticker())
    try:
        result = await blocked
    finally:
        done.set()
        await running
    return ticks, result


def called(calls: list[str], name: str, value: T) -> T:
    """Note a call of ``name`` in the call log and return ``value`` (a step's function)."""
    calls.append(name)
    return value


class Follower:
    """Reads a subscription in a thread: what it delivered, and whether it ever ended badly."""

    def __init__(self, subscription: actae.Subscription) -> None:
        self.subscription = subscription
        self.received: list[actae.ChannelEvent] = []
        self.failures: list[BaseException] = []
        self._thread = threading.Thread(target=self._follow, daemon=True)

    def start(self) -> Follower:
        self._thread.start()
        return self

    def _follow(self) -> None:
        try:
            for event in self.subscription:
                self.received.append(event)
        except BaseException as error:  # reported by the test: a subscription must not end
            self.failures.append(error)

    def close(self, within: float) -> None:
        """Stop the subscription and wait for the thread."""
        self.subscription.close()
        self._thread.join(within)


def private_overrides(ours: type, theirs: type) -> list[str]:
    """The underscore methods of ``theirs`` that Actae's classes in ``ours``'s MRO redefine.

    eventsourcing is used through its public API only: its private methods may change in
    any release, so a recorder that overrides one breaks without warning.
    """
    return [
        name
        for cls in ours.__mro__
        if cls.__module__.startswith("actae")
        for name in vars(cls)
        if name.startswith("_")
        and not name.startswith("__")
        and name != "_abc_impl"
        and hasattr(theirs, name)
    ]


def actae_cli(
    *args: str, cwd: Path | None = None, environ: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``actae args…`` run in this process: what it prints and its exit status.

    The CLI's ``main`` is what the ``actae`` script calls, so its one line and status are
    what a user sees; a traceback would be an exception here. (Each Python process spends
    over a second importing Actae: in-process, the file runs in seconds, not minutes.)
    ``environ`` is added to the environment, less ``ACTAE_DB``, for the call: the CLI reads
    it when it runs. A test runs the real command as well where a process is what it proves.
    """
    out, err = io.StringIO(), io.StringIO()
    before, saved = Path.cwd(), dict(os.environ)
    try:
        if cwd is not None:
            os.chdir(cwd)
        if environ is not None:
            os.environ.pop("ACTAE_DB", None)
            os.environ.update(environ)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main(list(args))
    finally:
        os.chdir(before)
        if environ is not None:
            os.environ.clear()
            os.environ.update(saved)
    return subprocess.CompletedProcess([*ACTAE, *args], status, out.getvalue(), err.getvalue())
