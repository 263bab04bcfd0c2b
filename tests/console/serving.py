"""``actae console`` as a real process, for the tests that need one (a browser, signals).

The process is started the way a user starts it (``python -m actae.adapters.cli console``)
and is ready when it logs ``serving http://...``: the test waits for that line, with a
deadline, instead of sleeping.
"""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Self

DEADLINE = 60.0
"""Seconds a console process has to start, answer or stop: generous, for a loaded machine (the
suite runs on two workers), and spent only when something is wrong."""


def free_port() -> int:
    """A TCP port nothing listens on now (the OS's choice)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class ConsoleProcess:
    """``actae console --db URL --port P --auth-file F`` until :meth:`stop` (or the block ends)."""

    def __init__(self, url: str, auth_file: Path, *extra: str) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.lines: list[str] = []
        self._arrived: queue.Queue[str | None] = queue.Queue()
        command = [
            sys.executable,
            "-m",
            "actae.adapters.cli",
            "console",
            "--db",
            url,
            "--port",
            str(self.port),
            "--auth-file",
            str(auth_file),
            *extra,
        ]
        self.process = subprocess.Popen(
            command,
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line.rstrip("\n"))
            self._arrived.put(line)
        self._arrived.put(None)

    def wait_for(self, text: str, deadline: float = DEADLINE) -> str:
        """The first line of the log (from now on or before) that contains ``text``."""
        ends = time.monotonic() + deadline
        seen = 0
        while True:
            for line in self.lines[seen:]:
                if text in line:
                    return line
            seen = len(self.lines)
            try:
                if self._arrived.get(timeout=max(0.0, ends - time.monotonic())) is None:
                    break
            except queue.Empty:
                break
        log = "\n".join(self.lines)
        raise AssertionError(f"the console never logged {text!r}; its log:\n{log}")

    def __enter__(self) -> Self:
        line = self.wait_for("serving http://")
        assert self.base in line, line
        return self

    def stop(self, signum: int = signal.SIGTERM) -> int:
        """Send ``signum``; its exit status (killed after the deadline, failing the test)."""
        if self.process.poll() is None:
            self.process.send_signal(signum)
        try:
            return self.process.wait(DEADLINE)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError("the console did not stop within the deadline") from None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.process.poll() is None:
            self.stop()
