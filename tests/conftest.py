"""Shared fixtures: one store per backend, PostgreSQL in a fresh schema per test.

PostgreSQL tests skip when no server answers locally, but fail when ``CI=true``: a CI run
that silently skipped them would prove nothing about the production backend.

``make test`` spreads the tests over two pytest-xdist workers, a test file at a time.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from xdist.scheduler import LoadFileScheduling

import actae
from actae.adapters.persistence import libpq

TEST_DSN = os.environ.get("ACTAE_TEST_DSN", "postgresql://postgres@127.0.0.1:5432/test")
BACKENDS = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


class WholeFiles(LoadFileScheduling):
    """Gives a worker whole test files (a fixture a module shares is built once), and the chaos
    tests all together (they share one throwaway PostgreSQL cluster per worker that needs one).
    """

    def _split_scope(self, nodeid: str) -> str:
        path = nodeid.split("::", 1)[0]
        return "tests/chaos" if path.startswith("tests/chaos/") else path


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> WholeFiles:
    """The scheduler of ``pytest -n``."""
    return WholeFiles(config, log)


def _postgres_problem() -> str | None:
    try:
        with psycopg.connect(TEST_DSN, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as error:
        return f"{TEST_DSN}: {error}".strip()
    return None


@pytest.fixture(autouse=True)
def process_wide_settings_put_back() -> Iterator[None]:
    """What a CLI command run in this process sets for the whole process, put back after.

    An entry point names the process's connections and installs a handler on the ``actae``
    loggers bound to the stderr of its moment (a test's capture, closed after the test);
    left behind, a later test's log lines would go there.
    """
    logger = logging.getLogger("actae")
    named, handlers, level = libpq._process_name, list(logger.handlers), logger.level
    yield
    libpq._process_name = named
    logger.handlers[:] = handlers
    logger.setLevel(level)


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
