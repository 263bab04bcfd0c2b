"""Opening takes turns on a lock only the store's owner can take, and waits for it a bounded time.

Migrations and the read models' creation used to take turns on advisory locks, which need
no privilege: an analyst's role holding ``pg_advisory_lock`` on the migrations' key kept
``actae.open`` waiting for as long as it liked (and the read models' key kept every worker
and projector from starting). Now an analyst's role can hold neither the old keys nor any
lock it can take on the turn tables without privilege (a prepared ``INSERT`` or ``DELETE``
in an open transaction keeps ``ROW EXCLUSIVE``), and an open that waits for a turn another
session holds gives up after the URL's ``lock_wait`` with ``StoreBusyError`` naming it.
"""

from __future__ import annotations

import threading
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from psycopg import sql

import actae
from actae.adapters.persistence import migrations
from actae.adapters.persistence.migrations import Migration, migrations_table
from actae.adapters.persistence.turns import DEFAULT_LOCK_WAIT, take_turn
from actae.adapters.readside.schema import TRACKING
from tests.integration.test_grant_analyst import Roles, cli, connect_as, roles, schema_of

__all__ = ["roles"]  # the fixture, used by name

pytestmark = pytest.mark.postgres

PATIENCE = 60.0
"""Seconds an open that must not wait at all gets, on a loaded machine."""


def opened_and_projected(url: str) -> None:
    with actae.open(url) as store:
        store.projector()  # the read models' creators take their turn too


def outcome_within(call: Any, within: float) -> tuple[bool, BaseException | None]:
    """Run ``call()`` in a thread: whether it ended within ``within`` s, and what it raised.

    A call that is still waiting is left to end once the test lets go of what it waits for.
    """
    failures: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as error:  # returned to the test
            failures.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(within)
    return not thread.is_alive(), (failures[0] if failures else None)


@contextmanager
def analyst_holding_every_lock_it_can(pg_dsn: str, role: str, schema: str) -> Iterator[None]:
    """The old advisory keys, and the locks its statements take before privileges are checked."""
    with connect_as(pg_dsn, role, schema) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (zlib.crc32(f"actae:{schema}".encode()),))
        conn.execute("SELECT pg_advisory_lock(hashtext(%s))", (f"actae-readmodels:{schema}",))
        conn.execute("BEGIN")
        conn.execute("PREPARE m AS INSERT INTO actae_migrations VALUES (99, 'x')")
        conn.execute(f"PREPARE t AS DELETE FROM {TRACKING}")
        yield
        conn.execute("ROLLBACK")


@contextmanager
def turn_held(pg_dsn: str, table: sql.Identifier) -> Iterator[int]:
    """Another session of the store's owner in its turn on ``table``; its backend pid."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn, conn.transaction():
        take_turn(conn, table, 5)
        yield conn.info.backend_pid


def test_an_open_waiting_for_a_turn_gives_up_naming_who_holds_it(pg_url: str, pg_dsn: str) -> None:
    schema = schema_of(pg_url)
    table = sql.Identifier(schema, "actae_migrations")
    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # another first open got this far
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        conn.execute(migrations_table(table))
    with turn_held(pg_dsn, table) as pid:
        began = time.monotonic()
        ended, refused = outcome_within(lambda: actae.open(f"{pg_url}&lock_wait=1"), PATIENCE)
        waited = time.monotonic() - began
    assert ended, "actae.open waited for the turn beyond lock_wait"
    assert isinstance(refused, actae.StoreBusyError), refused
    assert refused.pids == (pid,)
    assert f"pid {pid}" in str(refused)
    assert 1 <= waited < DEFAULT_LOCK_WAIT
    opened_and_projected(pg_url)  # once it is done, opening succeeds


def test_read_models_waiting_for_a_turn_give_up_naming_who_holds_it(
    pg_url: str, pg_dsn: str
) -> None:
    opened_and_projected(pg_url)
    with (
        turn_held(pg_dsn, sql.Identifier(schema_of(pg_url), TRACKING)) as pid,
        actae.open(f"{pg_url}&lock_wait=1") as store,
    ):
        ended, refused = outcome_within(store.projector, PATIENCE)
        assert ended, "the read models waited for the turn beyond lock_wait"
    assert isinstance(refused, actae.StoreBusyError), refused
    assert refused.pids == (pid,)
    assert TRACKING in refused.lock


def test_an_analyst_cannot_hold_up_opening(
    roles: Roles,
    pg_url: str,
    pg_dsn: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    opened_and_projected(pg_url)
    role = roles()
    assert cli(capsys, "grant-analyst", role, "--db", pg_url)[0] == 0
    schema = schema_of(pg_url)
    probe = Migration("a probe", ("CREATE TABLE {schema}.actae_probe (n integer)",))
    monkeypatch.setattr(  # a store one migration behind this Actae
        migrations, "POSTGRES_MIGRATIONS", (*migrations.POSTGRES_MIGRATIONS, probe)
    )
    with analyst_holding_every_lock_it_can(pg_dsn, role, schema):
        ended, failure = outcome_within(lambda: opened_and_projected(pg_url), PATIENCE)
        assert ended, "actae.open waited for the analyst's locks"
        assert failure is None, failure
    with psycopg.connect(pg_dsn, autocommit=True) as owner:
        row = owner.execute(f'SELECT max(version) FROM "{schema}".actae_migrations').fetchone()
    assert row == (2,)  # the migration ran meanwhile


def test_lock_wait_is_checked(pg_url: str) -> None:
    for bad in ("0", "abc", "86401"):
        with pytest.raises(actae.ValidationError, match=r"url\.lock_wait"):
            actae.open(f"{pg_url}&lock_wait={bad}")
