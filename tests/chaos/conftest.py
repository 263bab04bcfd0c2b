"""A throwaway PostgreSQL cluster that the chaos tests may restart, crash and cut off.

The shared server of ``make test`` is never touched: each session creates its own cluster
(``pg_createcluster``, which works as root where ``initdb`` refuses) on a free port, with
trust authentication on local TCP and fsync off for speed, and drops it at the end.
Like the PostgreSQL suite, it skips locally when the tools are missing but fails when
``CI=true``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

VERSION = "15"
SPEED = ("fsync=off", "full_page_writes=off", "shared_buffers=16MB")
"""Off: only what a machine crash would need. ``synchronous_commit`` stays on: a crash of the
server (SIGKILL to its postmaster) would otherwise lose commits their clients were told of."""
DATABASE = "chaos"


class ThrowawayCluster:
    """A PostgreSQL cluster of this test session: ``version/name`` on ``port``."""

    def __init__(self, name: str, port: int) -> None:
        self.name, self.port = name, port
        self.dsn = f"postgresql://postgres@127.0.0.1:{port}/{DATABASE}"

    def create(self) -> None:
        options = [flag for setting in SPEED for flag in ("-o", setting)]
        _run("pg_createcluster", VERSION, self.name, "-p", str(self.port), *options, "--",
             "--auth-host=trust", "--auth-local=trust")  # fmt: skip
        self.ctl("start")
        with psycopg.connect(
            f"postgresql://postgres@127.0.0.1:{self.port}/postgres", autocommit=True
        ) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE)))

    def ctl(self, action: str) -> None:
        _run("pg_ctlcluster", "--skip-systemctl-redirect", VERSION, self.name, action)

    def drop(self) -> None:
        _run("pg_dropcluster", "--stop", VERSION, self.name)


def _run(*command: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {done.stderr.strip() or done.stdout}")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _drop_orphans() -> None:
    """Drop the clusters of earlier sessions that were killed before they could drop theirs.

    A session's cluster is named after its pid; only clusters whose session is gone go.
    """
    listing = subprocess.run(
        ["pg_lsclusters", "--json"], capture_output=True, text=True, check=True
    ).stdout
    for found in json.loads(listing or "[]"):
        name = str(found["cluster"])
        pid = name.removeprefix("chaos-")
        if name.startswith("chaos-") and pid.isdigit() and not Path(f"/proc/{pid}").exists():
            with contextlib.suppress(RuntimeError):  # another session got there first
                ThrowawayCluster(name, int(found["port"])).drop()


def _missing() -> str | None:
    """Why no throwaway cluster can be made here, or None."""
    for tool in ("pg_createcluster", "pg_ctlcluster", "pg_dropcluster", "pg_lsclusters"):
        if shutil.which(tool) is None:
            return f"{tool} not found (Debian's postgresql-common)"
    if not Path(f"/usr/lib/postgresql/{VERSION}/bin/postgres").exists():
        return f"PostgreSQL {VERSION} server binaries not installed"
    if os.geteuid() != 0:
        return "pg_createcluster needs root"
    return None


@pytest.fixture(scope="session")
def chaos_cluster() -> Iterator[ThrowawayCluster]:
    """A running cluster of this session, with an empty ``chaos`` database; dropped after."""
    problem = _missing()
    if problem is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"the chaos suite needs a throwaway PostgreSQL cluster: {problem}")
        pytest.skip(f"no throwaway PostgreSQL cluster: {problem}")
    _drop_orphans()
    cluster = ThrowawayCluster(f"chaos-{os.getpid()}", _free_port())
    try:
        cluster.create()
    except Exception:
        with contextlib.suppress(RuntimeError):  # the creation error is the one to see
            cluster.drop()
        raise
    try:
        yield cluster
    finally:
        cluster.drop()


@pytest.fixture
def chaos_url(chaos_cluster: ThrowawayCluster) -> str:
    """A store URL on a fresh schema of the throwaway cluster."""
    return f"{chaos_cluster.dsn}?schema=chaos_{uuid.uuid4().hex[:12]}"
