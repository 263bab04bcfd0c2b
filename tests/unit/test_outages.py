"""Which database errors are waited out, and how an outage is logged.

Waiting out an error that cannot pass (a missing table, a closed pool, bad input) turns a
clear failure into an endless loop of log lines; failing on one that passes by itself (a
restart, a terminated backend) kills a long-running process for nothing.
"""

from __future__ import annotations

import socket
import sqlite3
from pathlib import Path

import psycopg
import pytest
from eventsourcing.persistence import OperationalError, ProgrammingError
from psycopg_pool import ConnectionPool

import actae
from actae.adapters.persistence.outages import Outage, is_transient, refuses_writes, ride_out


def raised(call: object) -> BaseException:
    try:
        call()  # type: ignore[operator]
    except BaseException as error:
        return error
    raise AssertionError("nothing was raised")


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.mark.postgres
def test_errors_from_a_real_server_are_told_apart(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as admin, psycopg.connect(pg_dsn) as victim:
        missing = raised(lambda: victim.execute("SELECT * FROM no_actae_table_here"))
        victim.rollback()
        admin.execute("SELECT pg_terminate_backend(%s)", (victim.info.backend_pid,))
        terminated = raised(lambda: victim.execute("SELECT 1"))
    refused = raised(lambda: psycopg.connect(f"host=127.0.0.1 port={closed_port()}"))
    no_database = raised(lambda: psycopg.connect(f"{pg_dsn}_no_such_database"))
    no_tls = raised(lambda: psycopg.connect(pg_dsn, sslmode="require"))

    assert isinstance(missing, psycopg.errors.UndefinedTable)
    assert not is_transient(missing)
    assert isinstance(terminated, psycopg.errors.AdminShutdown)
    assert is_transient(terminated)
    assert is_transient(refused)
    assert not is_transient(no_database)  # a login refused for good is no outage
    assert not is_transient(no_tls)


@pytest.mark.postgres
def test_a_read_only_server_is_an_outage_but_a_write_in_a_read_only_query_is_bad_input(
    pg_dsn: str,
) -> None:
    """SQLSTATE 25006 both ways: the server's refusal waits, the analyst's statement does not."""
    with psycopg.connect(pg_dsn) as conn:
        conn.execute("SET TRANSACTION READ ONLY")  # what a standby does to every transaction
        refused = raised(lambda: conn.execute("CREATE TEMPORARY TABLE t (x int)"))
        conn.rollback()
    assert isinstance(refused, psycopg.errors.ReadOnlySqlTransaction)
    assert is_transient(refused)
    assert refuses_writes(refused)
    assert not refuses_writes(psycopg.errors.AdminShutdown("bye"))
    bad_input = actae.ValidationError("statement", "only reads")
    bad_input.__cause__ = refused  # projector.query's refusal of a write: raised from it
    assert not is_transient(bad_input)


def test_a_read_only_server_is_logged_as_one() -> None:
    lines: list[str] = []
    attempts = iter([psycopg.errors.ReadOnlySqlTransaction("read-only transaction"), None])

    def call() -> None:
        failure = next(attempts)
        if failure is not None:
            raise failure

    ride_out(call, Outage("worker w1", lines.append), sleep=lambda _: None)
    assert lines[0] == (
        "worker w1: database is read-only (ReadOnlySqlTransaction: read-only transaction); retrying"
    )
    assert lines[1].startswith("worker w1: database back after ")


def test_errors_wrapped_by_eventsourcing_are_judged_by_their_cause() -> None:
    def wrapped(cause: BaseException, as_: type[Exception]) -> BaseException:
        try:
            raise as_(str(cause)) from cause
        except Exception as error:
            return error

    assert is_transient(wrapped(psycopg.errors.AdminShutdown("bye"), OperationalError))
    assert not is_transient(wrapped(psycopg.errors.UndefinedTable("gone"), ProgrammingError))


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (psycopg.errors.SerializationFailure("retry me"), True),
        (psycopg.errors.DeadlockDetected("retry me"), True),
        (psycopg.errors.CannotConnectNow("starting up"), True),
        (psycopg.errors.InsufficientPrivilege("no"), False),
        (psycopg.errors.UniqueViolation("taken"), False),
        (actae.ValidationError("x", "bad"), False),
        (ValueError("bad"), False),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, Exception) else str(value),
)
def test_error_classes(error: BaseException, transient: bool) -> None:
    assert is_transient(error) is transient


def test_a_closed_pool_is_not_an_outage() -> None:
    pool = ConnectionPool("host=127.0.0.1", open=False)
    assert not is_transient(raised(pool.getconn))


def test_sqlite_waits_out_a_lock_but_not_a_missing_table(tmp_path: Path) -> None:
    path = str(tmp_path / "x.db")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")
    other = sqlite3.connect(path, timeout=0)
    locked = raised(lambda: other.execute("SELECT * FROM t"))
    missing = raised(lambda: holder.execute("SELECT * FROM nothing"))
    holder.execute("ROLLBACK")

    assert is_transient(locked)
    assert not is_transient(missing)


def test_an_outage_is_logged_once_with_its_duration() -> None:
    lines: list[str] = []
    outage = Outage("worker w1", lines.append)
    attempts = iter([psycopg.OperationalError("down"), psycopg.OperationalError("down"), None])

    def call() -> str:
        failure = next(attempts)
        if failure is not None:
            raise failure
        return "ok"

    assert ride_out(call, outage, sleep=lambda _: None) == "ok"
    assert len(lines) == 2
    assert lines[0] == "worker w1: database unreachable (OperationalError: down); retrying"
    assert lines[1].startswith("worker w1: database back after ")
    assert outage.count == 1


def test_anything_else_fails_at_once() -> None:
    calls: list[int] = []

    def call() -> None:
        calls.append(1)
        raise psycopg.errors.UndefinedTable("relation does not exist")

    with pytest.raises(psycopg.errors.UndefinedTable):
        ride_out(call, Outage("w", lambda _: None), sleep=lambda _: None)
    assert calls == [1]


def test_reconnecting_keeps_an_embedded_read_model_database() -> None:
    """SQLite's transient error is a lock: the read models stay where they are."""
    with actae.open("memory://") as store:
        store.start_run("wf", agent_id="a", state={})
        projector = store.projector()
        projector.catch_up()
        projector.db.reconnect()  # what the projector does before retrying a failed batch
        assert len(projector.query("SELECT run_id FROM run_status")) == 1
