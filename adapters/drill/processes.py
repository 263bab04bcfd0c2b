"""The drill's processes: the mock provider and the worker processes, started and stopped.

Every worker is a real ``actae worker`` process, running the drill's workflows
(``python -m actae.adapters.cli.drill_worker``, which hands them to the ``actae worker``
command with the drill's settings and hooks), on the drill's shared virtual clock (the clock
file), with its stderr in ``<name>.log`` in the drill's folder; the drill kills them with
SIGKILL and stops the rest with SIGTERM.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from actae.adapters.runtime.store import Store

LEASE = 10.0
"""Seconds a worker's run lease lasts without a heartbeat (``actae worker --lease``)."""


class DrillProcesses:
    """Starting and stopping the drill's provider and workers (a part of ``Drill``)."""

    url: str
    folder: Path
    faults: Collection[str]
    store: Store
    provider: subprocess.Popen[str]
    provider_url: str
    workers: list[subprocess.Popen[str]]
    worker_names: dict[int, str]  # by pid

    def _start_provider(self) -> tuple[subprocess.Popen[str], str]:
        ignore_keys = "provider-ignores-idempotency-keys" in self.faults
        process = subprocess.Popen(  # noqa: S603 - our own module
            [
                sys.executable,
                "-m",
                "actae.adapters.drill.provider",
                str(self.folder / "provider.db"),
                *(["--ignore-idempotency-keys"] if ignore_keys else []),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert process.stdout is not None  # noqa: S101
        port = process.stdout.readline().split()[1]
        return process, f"http://127.0.0.1:{port}"

    def _start_worker(self, name: str, schema: int, crash: str = "") -> subprocess.Popen[str]:
        env = {
            "ACTAE_DRILL_CRASH": crash,
            "ACTAE_DRILL_CRASH_MARKER": str(self.folder / f"{name}.crashed"),
            **os.environ,
            "ACTAE_DRILL_PROVIDER": self.provider_url,
            "ACTAE_DRILL_SCHEMA": str(schema),
            "ACTAE_DRILL_FAULTS": ",".join(self.faults),
            "ACTAE_DB": self.url,  # not on the command line, where ps shows a password
        }
        process = subprocess.Popen(  # noqa: S603 - our own CLI
            [
                sys.executable,
                "-m",
                "actae.adapters.cli.drill_worker",  # actae worker, with the drill's workflows
                "--wait-for-db",
                "60",  # a worker may start while the drill's database fault is on
                "--name",
                name,
                "--lease",
                str(LEASE),
                "--poll-interval",
                "0.05",
                "--clock-file",
                str(self.folder / "clock"),
            ],
            env=env,
            stderr=(self.folder / f"{name}.log").open("w"),
            text=True,
        )
        self.workers.append(process)
        self.worker_names[process.pid] = name
        return process

    def _working(self, name: str) -> bool:
        """Whether worker ``name`` opened its store and works (it says so on stderr)."""
        return "working on" in (self.folder / f"{name}.log").read_text(errors="replace")

    def _stop_workers(self) -> None:
        _stop(self.workers)
        self.workers.clear()

    def close(self) -> None:
        """Stop every process and the store."""
        _stop([*self.workers, self.provider])
        self.store.close()


def _stop(processes: list[subprocess.Popen[str]]) -> None:
    """SIGTERM to each process still running; SIGKILL to one still there 10 s later."""
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
