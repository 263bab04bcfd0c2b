"""Database faults on purpose: each one cuts the sessions off and the server comes back."""

from __future__ import annotations

from typing import TYPE_CHECKING

import psycopg
import pytest

import actae
from actae.adapters.drill.db_faults import DatabaseServer

if TYPE_CHECKING:
    from tests.chaos.conftest import ThrowawayCluster


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("memory://", "memory has no server"),
        ("sqlite:///runs.db", "sqlite has no server"),
        ("postgresql://postgres@db.example.com:5432/x", "on this machine"),
    ],
)
def test_a_server_that_cannot_be_controlled_here_is_refused(url: str, why: str) -> None:
    with pytest.raises(actae.ValidationError, match=why) as refused:
        DatabaseServer(url)

    assert refused.value.field == "db_fault"


def test_a_port_no_cluster_listens_on_is_refused(chaos_cluster: ThrowawayCluster) -> None:
    with pytest.raises(actae.ValidationError, match="no running PostgreSQL cluster") as refused:
        DatabaseServer(f"postgresql://postgres@127.0.0.1:{chaos_cluster.port + 1}/chaos")

    assert refused.value.field == "db_fault"


def postmaster(conn: psycopg.Connection[tuple[object, ...]]) -> object:
    row = conn.execute("SELECT pg_postmaster_start_time()").fetchone()
    assert row is not None
    return row[0]


@pytest.mark.parametrize("fault", ["restart", "crash", "terminate"])
def test_a_fault_cuts_every_session_and_the_server_comes_back(
    chaos_cluster: ThrowawayCluster, fault: str
) -> None:
    server = DatabaseServer(chaos_cluster.dsn)
    before = psycopg.connect(chaos_cluster.dsn, autocommit=True)
    started = postmaster(before)

    outage = server.inject(fault)

    with pytest.raises(psycopg.OperationalError):
        before.execute("SELECT 1")
    before.close()
    with psycopg.connect(chaos_cluster.dsn, autocommit=True) as after:
        restarted = postmaster(after) != started
    assert restarted is (fault != "terminate")
    assert outage.fault == fault
    assert outage.ended >= outage.started
    assert outage.sessions_terminated == (1 if fault == "terminate" else 0)
    if fault != "terminate":
        assert outage.seconds > 0
