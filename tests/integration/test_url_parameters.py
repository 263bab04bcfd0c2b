"""PostgreSQL URL parameters: checked, carried to every connection, or refused by name.

A libpq parameter such as ``sslmode=require`` that reached only some of a store's
connections (or none, as before) would leave the others in plaintext while the URL says
otherwise; so each accepted parameter must reach eventsourcing's pool, the migrations, the
read models, LISTEN and the database clock alike, and every other one is refused by name.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

import actae
from actae.adapters.persistence.libpq import PASSED_THROUGH, REFUSED
from actae.adapters.persistence.url import DEAD_SERVER_DEFAULTS, parse_store_url
from tests.helpers import actae_cli


@pytest.mark.parametrize(
    ("query_or_netloc", "field"),
    [
        ("h:abc/db", "url"),
        ("h:0/db", "url"),
        ("h:70000/db", "url"),
        ("h/db?pool_size=abc", "url.pool_size"),
        ("h/db?pool_size=0", "url.pool_size"),
        ("h/db?pool_size=-1", "url.pool_size"),
        ("h/db?pool_size=100000", "url.pool_size"),
        ("h/db?max_overflow=-1", "url.max_overflow"),
        ("h/db?max_overflow=1.5", "url.max_overflow"),
        ("h/db?connect_timeout=-1", "url.connect_timeout"),
        ("h/db?connect_timeout=0", "url.connect_timeout"),
        ("h/db?connect_timeout=ten", "url.connect_timeout"),
        ("h/db?keepalives_idle=99999999999999999999999", "url.keepalives_idle"),
        ("h/db?sslmode=requre", "url.sslmode"),
        ("h/db?target_session_attrs=writable", "url.target_session_attrs"),
        ("h/db?sslmode=", "url.sslmode"),
        ("h/db?sslmode=require&sslmode=disable", "url.sslmode"),
        ("h/db?sslmode", "url"),
        ("h/db?application_name=a%00b", "url.application_name"),
        ("h/d%00b", "url.dbname"),
        ("us%00er@h/db", "url.user"),
        ("h/db?colour=blue", "url.colour"),
    ],
)
def test_malformed_url_parts_are_refused_by_name(query_or_netloc: str, field: str) -> None:
    with pytest.raises(actae.ValidationError) as caught:
        actae.open(f"postgresql://{query_or_netloc}")
    assert caught.value.field == field


@pytest.mark.parametrize(
    ("url", "name"),
    [("sqlite:///runs.db?schema=a", "schema"), ("memory://?pool_size=2", "pool_size")],
)
def test_an_option_sqlite_does_not_take_is_refused_by_name(url: str, name: str) -> None:
    with pytest.raises(actae.ValidationError) as caught:
        parse_store_url(url)
    assert caught.value.field == f"url.{name}"
    assert caught.value.reason.endswith("this backend takes keyring, inline_max, artifacts")


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_libpq_parameters_that_cannot_be_carried_are_refused_by_name(name: str) -> None:
    with pytest.raises(actae.ValidationError) as caught:
        actae.open(f"postgresql://h/db?{name}=x")
    assert caught.value.field == f"url.{name}"
    assert caught.value.reason.startswith("not accepted: ")


def test_secrets_never_show_in_the_display_or_repr(pg_url: str) -> None:
    url = f"{pg_url.replace('postgres@', 'postgres:pw-secret@')}&sslpassword=key-secret"
    parsed = parse_store_url(url)
    assert "secret" not in parsed.display
    assert parsed.display.count("***") == 2
    with actae.open(pg_url) as store:  # trust auth: any password is accepted
        assert "secret" not in repr(store) + store.url


PARAMETERS = {
    "application_name": "actae-url-test",
    "connect_timeout": "7",
    "keepalives": "1",
    "keepalives_idle": "31",
    "sslmode": "prefer",
    "target_session_attrs": "read-write",
    "options": "-c statement_timeout=123s",
}


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The parameters of every connection psycopg opens (directly or through a pool)."""
    opened: list[dict[str, Any]] = []
    original = psycopg.Connection.connect.__func__  # type: ignore[attr-defined]

    def connect(cls: Any, /, conninfo: str = "", **kwargs: Any) -> Any:
        opened.append(conninfo_to_dict(conninfo, **kwargs))
        return original(cls, conninfo, **kwargs)

    monkeypatch.setattr(psycopg.Connection, "connect", classmethod(connect))
    return opened


def test_libpq_parameters_reach_every_connection(
    pg_url: str, connections: list[dict[str, Any]]
) -> None:
    assert set(PARAMETERS) <= PASSED_THROUGH
    query = "&".join(f"{name}={value.replace(' ', '%20')}" for name, value in PARAMETERS.items())
    with actae.open(f"{pg_url}&{query}") as store:
        run = store.start_run("wf", agent_id="a", state={})  # the pool
        store.projector().catch_up()  # the read models
        with store.subscribe(run.channel_id) as subscription:  # through the pool
            assert next(subscription).cursor == 1
        with store._service.recorder.datastore.get_connection() as conn:  # type: ignore[attr-defined]
            shown = conn.execute("SHOW statement_timeout").fetchone()
        assert shown == {"statement_timeout": "123s"}
        with psycopg.connect(pg_url.split("?", maxsplit=1)[0]) as observer:
            row = observer.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                (PARAMETERS["application_name"],),
            ).fetchone()
        assert row is not None
        assert row[0] >= 1  # the pool's: events and read models alike

    assert len(connections) >= 2  # the migrations' and the pool's, at least
    for given in connections:
        carried = {name: given.get(name) for name in PARAMETERS}
        options = carried.pop("options") or ""
        assert options.startswith(PARAMETERS["options"]), given  # the pool adds search_path
        assert carried == {k: v for k, v in PARAMETERS.items() if k != "options"}, given


def test_every_connection_notices_a_dead_server_unless_the_url_says_otherwise(
    pg_url: str, connections: list[dict[str, Any]]
) -> None:
    """A failover without a TCP reset must not leave a statement waiting for ~15 minutes."""
    with actae.open(f"{pg_url}&keepalives_idle=45") as store:
        run = store.start_run("wf", agent_id="a", state={})  # the pool
        store.projector().catch_up()  # the read models
        with store.subscribe(run.channel_id) as subscription:  # through the pool
            assert next(subscription).cursor == 1

    expected = {**DEAD_SERVER_DEFAULTS, "keepalives_idle": "45"}
    assert len(connections) >= 2
    for given in connections:
        assert {name: given.get(name) for name in expected} == expected, given


def test_sslmode_require_is_refused_by_a_server_without_tls(pg_url: str) -> None:
    with pytest.raises(psycopg.OperationalError, match="SSL"):
        actae.open(f"{pg_url}&sslmode=require")


def test_sslmode_require_on_the_command_line_is_one_line_that_says_ssl(pg_url: str) -> None:
    url = f"{pg_url}&sslmode=require"
    # The CLI's main in this process: tests/integration/test_cli_errors.py holds the real
    # command to one line and status 2; what counts here is that the line names SSL.
    result = actae_cli("run", "--db", url, str(uuid.uuid4()))
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert "SSL was required" in result.stderr


OPEN_AND_WRITE = """
import sys, actae
with actae.open(sys.argv[1]) as store:
    run = store.start_run("wf", agent_id="a", state={})
    store.projector().catch_up()
    print(store.run(run.run_id).status.value)
"""


@pytest.mark.parametrize("route", ["passfile", "home"])
def test_a_url_without_password_consults_the_password_file(
    pg_url: str, tmp_path: Path, route: str
) -> None:
    """libpq reads the password file when the URL holds no password.

    The test server trusts every local connection, so no password is ever checked; but
    libpq warns when it reads a password file that others may read, and that warning shows
    that the file was consulted, for the pool's connections as for Actae's own.
    """
    home = tmp_path / "home"
    home.mkdir()
    passfile = home / ".pgpass"
    passfile.write_text("*:*:*:*:not-checked\n")
    passfile.chmod(0o644)  # readable by others: libpq warns each time it reads it
    url = f"{pg_url}&passfile={passfile}" if route == "passfile" else pg_url
    env = {**os.environ, "HOME": str(home)}
    env.pop("PGPASSFILE", None)

    result = subprocess.run(
        [sys.executable, "-c", OPEN_AND_WRITE, url],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env=env,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "running"
    warnings = result.stderr.count(f'password file "{passfile}" has group or world access')
    assert warnings >= 4, result.stderr  # migrations, clock, the pool (read models too), ...
