"""Database faults on purpose: restart, crash or cut off the PostgreSQL server behind a URL.

Only a cluster on this machine can be controlled (Debian's ``pg_ctlcluster``, as root or its
owner; the URL's port picks it): anything else is refused before any fault (docs/chaos.md).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo

from actae.adapters.persistence.clock import wall_clock
from actae.adapters.persistence.url import parse_store_url
from actae.adapters.runtime.backends import backend_for
from actae.domain.errors import ValidationError

FAULTS = ("restart", "crash", "terminate")
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", ""})
BACK_WITHIN = 60.0  # seconds a faulted server gets to accept connections again
PROBE_EVERY = 0.02


class DatabaseFaultError(RuntimeError):
    """A fault was injected but the server did not come back (or the tools failed)."""


@dataclass(frozen=True)
class Outage:
    """One fault, and how long the server refused connections (to the new postmaster's start)."""

    fault: str
    started: datetime
    ended: datetime
    seconds: float
    sessions_terminated: int = 0

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: moments as ISO text."""
        return {
            **asdict(self),
            "started": self.started.isoformat(),
            "ended": self.ended.isoformat(),
        }


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise ValidationError(
            "db_fault", f"{name} not found: controlling the server needs postgresql-common"
        )
    return path


class DatabaseServer:
    """The local PostgreSQL cluster that serves a store URL, and the faults it can suffer."""

    def __init__(self, url: str) -> None:
        backend = backend_for(parse_store_url(url))
        self.conninfo = backend.server("db_fault", needed_by="", missing="server to restart")
        self.dsn = make_conninfo(**self.conninfo)
        host = self.conninfo["host"]
        if host not in LOCAL_HOSTS and not host.startswith("/"):
            raise ValidationError(
                "db_fault",
                f"can only control a server on this machine (127.0.0.1, localhost or a "
                f"socket folder), not {host}",
            )
        port = int(self.conninfo["port"])
        listing = subprocess.run(  # noqa: S603 - a fixed tool, no shell
            [_tool("pg_lsclusters"), "--json"], capture_output=True, text=True, check=True
        )
        found = [
            cluster
            for cluster in json.loads(listing.stdout or "[]")
            if int(cluster.get("port", 0)) == port and cluster.get("running")
        ]
        if not found:
            raise ValidationError(
                "db_fault", f"no running PostgreSQL cluster on this machine listens on port {port}"
            )
        self.version, self.name = str(found[0]["version"]), str(found[0]["cluster"])
        self.pgdata, owner = Path(found[0]["pgdata"]), int(found[0]["owneruid"])
        self.label = f"{self.version}/{self.name}"  # 15/main, as Debian's tools name it
        if os.geteuid() not in (0, owner):
            raise ValidationError(
                "db_fault",
                f"controlling cluster {self.label} needs root or its owner (uid {owner})",
            )

    def inject(self, fault: str, clock: Callable[[], datetime] = wall_clock) -> Outage:
        """Do ``fault`` (one of ``FAULTS``); return once the server accepts connections."""
        if fault not in FAULTS:
            raise ValidationError("db_fault", f"expected one of {FAULTS}, got {fault!r}")
        # Both ends of a restart are read on the server's clock (its start time is one), and a
        # termination is timed on this host's monotonic clock: never one clock against another.
        started = clock()
        began = time.monotonic() if fault == "terminate" else self._epoch("clock_timestamp()")
        terminated = 0
        if fault == "restart":
            self._ctl("restart", "-m", "fast")
        elif fault == "crash":
            self._crash()
        else:
            terminated = self._terminate()
        self.wait_until_accepting()
        back = (
            time.monotonic() if fault == "terminate" else self._epoch("pg_postmaster_start_time()")
        )
        seconds = max(back - began, 0.0)
        ended = started + timedelta(seconds=seconds)
        return Outage(fault, started, ended, round(seconds, 3), terminated)

    def _value(self, query: str) -> Any:
        """The one value ``query`` answers, on a session of its own."""
        with psycopg.connect(self.dsn, autocommit=True, connect_timeout=10) as conn:
            row = conn.execute(query).fetchone()
        assert row is not None  # noqa: S101 - each query here always answers one row
        return row[0]

    def _epoch(self, moment: str) -> float:
        """``moment`` (``clock_timestamp()``: now) in epoch seconds on the server's clock."""
        return float(self._value(f"SELECT extract(epoch FROM {moment})::float8"))  # noqa: S608

    def _ctl(self, action: str, *options: str) -> None:
        command = [_tool("pg_ctlcluster"), "--skip-systemctl-redirect", self.version, self.name]
        done = subprocess.run(  # noqa: S603 - a fixed tool, no shell
            [*command, action, *options], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            detail = (done.stderr or done.stdout).strip().replace("\n", " ")
            raise DatabaseFaultError(f"pg_ctlcluster {action} {self.label} failed: {detail}")

    def _crash(self) -> None:
        # SIGKILL the postmaster; start the cluster once its orphans (holding its shared
        # memory, which blocks a start) have exited.
        postmaster = int((self.pgdata / "postmaster.pid").read_text().split()[0])
        children = _children(postmaster)
        os.kill(postmaster, signal.SIGKILL)
        deadline = time.monotonic() + BACK_WITHIN
        while any(_exists(pid) for pid in [postmaster, *children]):
            if time.monotonic() > deadline:
                msg = f"the processes of {self.label} outlived their killed postmaster"
                raise DatabaseFaultError(msg)
            time.sleep(PROBE_EVERY)  # waiting for other processes to exit, with a deadline
        self._ctl("start")

    def _terminate(self) -> int:
        """Terminate every other session of the URL's database; how many there were."""
        return int(
            self._value(
                "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        )

    def wait_until_accepting(self, within: float = BACK_WITHIN) -> None:
        """Return once a new session answers a query; ``DatabaseFaultError`` after ``within``."""
        deadline = time.monotonic() + within
        while True:
            try:
                with psycopg.connect(self.dsn, autocommit=True, connect_timeout=2) as conn:
                    conn.execute("SELECT 1")
                return
            except psycopg.Error:
                if time.monotonic() > deadline:
                    msg = f"{self.label} did not accept connections within {within:g} s"
                    raise DatabaseFaultError(msg) from None
            time.sleep(PROBE_EVERY)  # probing the server, with a deadline


def _children(parent: int) -> list[int]:
    """Processes whose parent is ``parent`` (Linux ``/proc``)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # the process ended while we looked
        if int(fields[1]) == parent:
            found.append(int(stat.parent.name))
    return found


def _exists(pid: int) -> bool:
    """Whether ``pid`` is still taken: a new postmaster takes an unreaped zombie for live."""
    return Path(f"/proc/{pid}").exists()
