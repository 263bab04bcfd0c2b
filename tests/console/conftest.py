"""One console per backend and test module: a store with every kind of run, two users.

The store and its app are shared by a module's tests (building them per test would cost
seconds on PostgreSQL); each test that changes something makes its own runs, so tests do
not depend on each other's order.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from fastapi.testclient import TestClient
from psycopg import sql

import actae
from actae.adapters.console.app import create_app
from actae.adapters.console.auth import add_user, load_users
from tests.console.harness import OPERATOR, VIEWER, Console
from tests.console.scenario import Scenario


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def console_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A store URL on each durable backend, for one test module."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path_factory.mktemp('console') / 'runs.db'}"
        return
    dsn: str = request.getfixturevalue("pg_dsn")
    schema = f"test_console_{uuid.uuid4().hex[:12]}"
    yield f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture(scope="module")
def console(console_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    """The console over a populated store, with an operator and a viewer."""
    auth_file = tmp_path_factory.mktemp("auth") / "users.json"
    tokens = {OPERATOR: add_user(auth_file, OPERATOR, "operator")}
    tokens[VIEWER] = add_user(auth_file, VIEWER, "viewer")
    clock = actae.ManualClock()
    store = actae.open(console_url, clock=clock)
    scenario = Scenario(store, clock)
    made = scenario.populate()
    # the app closes the store when it stops; it is reached at the test client's address
    app = create_app(store, load_users(auth_file), origins=["http://127.0.0.1"])
    with TestClient(app, base_url="http://127.0.0.1") as client:
        yield Console(client, store, scenario, made, tokens, auth_file)
