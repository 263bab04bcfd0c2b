"""Chaos: the server turns read-only under running processes, as after a failover to a standby.

Two ``actae worker`` processes and one ``actae project`` process work through multi-step runs
while the throwaway cluster's ``default_transaction_read_only`` is on (``ALTER SYSTEM`` and a
reload: every session's next transaction is read-only, reads still work, every write fails
with SQLSTATE 25006), or as after a failover to a standby (every session ends, the new ones
are read-only, and they stay so after the spell: only a process that connects anew after a
refused write finds the writable server again). Runs are started during the spell through
a session that overrides the setting, so that every process meets a write it cannot make:
the workers take the new runs, the projector has their events to apply. Each process must
ride the spell out as an outage (logged at its start and its end), nobody may exit, every
run must complete once writes succeed again, and no step or payment may run twice.

It used to end all three processes with ``ReadOnlySqlTransaction`` (exit status 1), leaving
the runs ``running`` with nobody to serve them.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

import actae
from actae.adapters.persistence.outages import Outage, ride_out
from tests.chaos.conftest import DATABASE
from tests.chaos.test_chaos import PROVIDER, TIMEOUT, Chaos, each_function_ran_once

pytestmark = pytest.mark.postgres

RUNS_BEFORE = 4
RUNS_DURING = 4
READ_ONLY_AT_LEAST = 5.0
"""Seconds the server stays read-only at least (also until every process said so): long
enough for the retries' backoff to reach its cap, well inside the workers' lease."""
LEASE = 60.0
"""The workers' run lease: longer than the spell, so no run changes hands because of it."""
WRITABLE = "options=-c%20default_transaction_read_only%3Doff"
"""A session setting wins over the server's: the test's own writer keeps writing."""


@contextmanager
def read_only(dsn: str) -> Iterator[None]:
    """Every session's next transaction is read-only inside the block, writable after it."""
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute("ALTER SYSTEM SET default_transaction_read_only = on")
        admin.execute("SELECT pg_reload_conf()")
        try:
            yield
        finally:
            admin.execute("ALTER SYSTEM RESET default_transaction_read_only")
            admin.execute("SELECT pg_reload_conf()")


@contextmanager
def on_a_standby(dsn: str) -> Iterator[None]:
    """As a failover to a standby: every session ends, and the new ones are read-only.

    After the block new sessions are writable again, but the read-only ones stay as they
    are (as sessions still connected to a standby would): only a process that connects
    anew after a refused write can write again.
    """
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f"ALTER DATABASE {DATABASE} SET default_transaction_read_only = on")
        try:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            yield
        finally:
            admin.execute(f"ALTER DATABASE {DATABASE} RESET default_transaction_read_only")


READ_ONLY_SPELLS = {"reloaded": read_only, "standby": on_a_standby}
OUTAGE_LINES = {
    "reloaded": ("database is read-only",),
    # The outage begins with the terminated sessions; the refused writes continue it.
    "standby": ("database is read-only", "database unreachable"),
}
"""What a process says when the spell begins (once per outage, however it goes on)."""


def outage_said(log: str, spell: str) -> bool:
    return any(line in log for line in OUTAGE_LINES[spell])


def refuses_writes(dsn: str) -> bool:
    """Whether a new session of the cluster is read-only (the reload has been applied)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SHOW default_transaction_read_only").fetchone()
    return row == ("on",)


def start_runs(store: actae.Store, names: list[str]) -> list[actae.RunInfo]:
    """Start runs, waiting out terminated sessions like any client would (idempotent)."""
    return [
        ride_out(
            lambda name=name: store.start_run(  # type: ignore[misc]
                name, agent_id="chaos", state={}, operation_id=f"chaos:{name}"
            ),
            Outage("test client", lambda _: None),
            within=TIMEOUT,
        )
        for name in names
    ]


@pytest.mark.parametrize("spell", sorted(READ_ONLY_SPELLS))
def test_processes_ride_out_a_read_only_server(
    chaos_cluster: Any, chaos_url: str, tmp_path: Path, spell: str
) -> None:
    with actae.open(chaos_url) as store:
        store.projector()  # the read-model tables exist before three processes race for them
        runs = start_runs(store, [f"before-{n}" for n in range(RUNS_BEFORE)])
    chaos = Chaos(chaos_url, tmp_path, lease=LEASE)
    try:
        chaos.start()
        with actae.open(chaos_url) as store, actae.open(f"{chaos_url}&{WRITABLE}") as writer:
            chaos.wait_for(lambda: len(chaos.calls()) >= 2, "the first calls")
            with READ_ONLY_SPELLS[spell](chaos_cluster.dsn):
                began = time.monotonic()
                chaos.wait_for(lambda: refuses_writes(chaos_cluster.dsn), "a read-only server")
                runs += start_runs(writer, [f"during-{n}" for n in range(RUNS_DURING)])

                def everyone_waits() -> bool:
                    said = [outage_said(p.log.read_text(), spell) for p in chaos.processes]
                    return all(said) and time.monotonic() - began >= READ_ONLY_AT_LEAST

                chaos.wait_for(everyone_waits, "every process to ride out the read-only server")
            chaos.wait_for(lambda: chaos.check_runs(store, runs), "every run to complete")
            target = store._service.recorder.max_notification_id()
            chaos.wait_for(lambda: store.projector().position() == target, "read models")
            chaos.check_alive()
            for process in chaos.processes:
                said = process.log.read_text()
                assert outage_said(said, spell), f"{process.name}:\n{process.tail()}"
                assert "database back after" in said, f"{process.name}:\n{process.tail()}"
                process.popen.send_signal(signal.SIGTERM)
                assert process.popen.wait(20) == 0, f"{process.name}:\n{process.tail()}"
    finally:
        chaos.stop()

    calls = chaos.calls()
    each_function_ran_once(calls, runs)
    provider = PROVIDER.MockProvider(tmp_path / "provider.db")
    assert (provider.charges(), provider.requests()) == (len(runs), len(runs))
