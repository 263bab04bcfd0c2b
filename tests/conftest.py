"""Shared fixtures: one store per backend, PostgreSQL in a fresh schema per test.

PostgreSQL tests skip when no server answers locally, but fail when ``CI=true``: a CI run
that silently skipped them would prove nothing about the production backend.

``make test`` spreads the tests over two pytest-xdist workers (``--dist loadgroup``); the
grouping below keeps together what shares an expensive fixture, so that it is built once.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

import actae

TEST_DSN = os.environ.get("ACTAE_TEST_DSN", "postgresql://postgres@127.0.0.1:5432/test")
BACKENDS = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


SHARED_BY_GROUP = {"chaos_cluster": "chaos-cluster"}
"""Session fixtures too costly to build on each worker → the one worker group that uses them."""
MODULE_SCOPES = {"package", "module", "class"}


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put a test on the worker of its group: the one of the costly session fixture it uses,
    or its module's when it uses a fixture built once per module (a console, a browser)."""
    for item in items:
        fixtures = getattr(item, "_fixtureinfo", None)
        if fixtures is None or item.get_closest_marker("xdist_group") is not None:
            continue
        used = {name: defs[-1].scope for name, defs in fixtures.name2fixturedefs.items() if defs}
        shared = sorted(SHARED_BY_GROUP[name] for name in used if name in SHARED_BY_GROUP)
        if shared:
            item.add_marker(pytest.mark.xdist_group(shared[0]))
        elif MODULE_SCOPES & set(used.values()):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))


def _postgres_problem() -> str | None:
    try:
        with psycopg.connect(TEST_DSN, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as error:
        return f"{TEST_DSN}: {error}".strip()
    return None


@pytest.fixture(scope="session")
def pg_dsn() -> str:
    """The test server's DSN; skip (locally) or fail (CI) when it does not answer."""
    problem = _postgres_problem()
    if problem is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"PostgreSQL is required when CI=true and did not answer: {problem}")
        pytest.skip(f"PostgreSQL not available: {problem}")
    return TEST_DSN


def with_schema(dsn: str, schema: str) -> str:
    """The DSN as an Actae store URL that uses ``schema``."""
    return f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}"


@pytest.fixture
def pg_url(pg_dsn: str) -> Iterator[str]:
    """A store URL on a fresh schema, dropped after the test."""
    schema = f"test_{uuid.uuid4().hex[:16]}"
    yield with_schema(pg_dsn, schema)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URL for an empty store on each backend."""
    if request.param == "memory":
        return "memory://"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'runs.db'}"
    url: str = request.getfixturevalue("pg_url")
    return url


@pytest.fixture
def clock() -> actae.ManualClock:
    """A clock that moves only when the test says so."""
    return actae.ManualClock()


@pytest.fixture
def store(store_url: str, clock: actae.ManualClock) -> Iterator[actae.Store]:
    """An open store on each backend, on the test's manual clock."""
    with actae.open(store_url, clock=clock) as opened:
        yield opened


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def durable_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URL for an empty store on each backend that outlives the process."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'runs.db'}"
    url: str = request.getfixturevalue("pg_url")
    return url


InDoubt = Callable[[actae.RunInfo, str], str]


@pytest.fixture
def in_doubt(store: actae.Store, clock: actae.ManualClock) -> InDoubt:
    """Leave the run's first ``ctx.effect(name, ...)`` in doubt: claimed as ``ctx.effect``
    claims it by a worker that died inside it, its 30 s lease run out. Returns the key."""

    def leave(run: actae.RunInfo, name: str) -> str:
        key = f"{run.run_id}:effect:{name}:1"
        store.claim(key, run_id=run.run_id, worker="dead", lease=30.0, request={"name": name})
        clock.advance(31)
        return key

    return leave
