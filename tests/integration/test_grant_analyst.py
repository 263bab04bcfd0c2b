"""``actae grant-analyst ROLE``: an analyst's role reads the read models and nothing else.

Each test makes throwaway roles (dropped at the end with ``DROP OWNED BY`` and ``DROP ROLE``),
runs the command through ``actae``'s entry point in this process, then connects AS the role
and checks both sides: every read-model table and view answers with rows, every table that
holds payloads or their keys refuses with InsufficientPrivilege. The grant survives a
rebuild (which drops the old tables and their grants), ``--revoke`` takes it back, and a
store that is not on PostgreSQL, a role that does not exist, a superuser, the tables' owner
and a role that PUBLIC would still let in are refused with one line and exit status 2.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

import actae
from actae.adapters.cli.main import main
from actae.adapters.persistence.url import parse_store_url
from actae.adapters.readside.grants import ANALYSTS
from actae.projections.tables import TABLES, VIEWS

pytestmark = pytest.mark.postgres

READ_MODELS = [relation.name for relation in (*TABLES, *VIEWS)]
PAYLOADS = [
    "actae_events",
    "actae_data_keys",
    "actae_artifacts",
    "actae_artifact_chunks",
    "actae_artifact_refs",
    "actae_secrets",
    "actae_migrations",
    "actae_projection_tracking",
    "actae_projection_errors",
    ANALYSTS,
]
"""Tables an analyst must not read (the last one exists once a role was granted)."""

Roles = Callable[..., str]


@pytest.fixture
def roles(pg_dsn: str) -> Iterator[Roles]:
    """Makes throwaway roles (``analyst_<random>`` unless named); drops them all at the end.

    Tests ask for it before ``pg_url``, so that the schema is dropped first.
    """
    made: list[str] = []

    def make(name: str | None = None, *, options: str = "LOGIN") -> str:
        role = name or f"analyst_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            create = sql.SQL("CREATE ROLE {} " + options)
            conn.execute(create.format(sql.Identifier(role)))
        made.append(role)
        return role

    yield make
    failures = []
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for role in reversed(made):  # each one, whatever becomes of the others
            ident = sql.Identifier(role)
            try:
                conn.execute(sql.SQL("DROP OWNED BY {}").format(ident))
                conn.execute(sql.SQL("DROP ROLE {}").format(ident))
            except psycopg.Error as error:
                failures.append(f"{role}: {error}")
    assert not failures, failures


def fill(url: str) -> None:
    """Runs that leave a row in every read model: usage, a child, an effect, an audit entry."""
    with actae.open(url) as store:
        run = store.start_run("order-1", agent_id="shipper", state={"card": "4242"})
        usage = {"input_tokens": 120.0, "output_tokens": 30.0, "cost": 0.02}
        payload = {"prompt": "secret"}
        store.record(run.channel_id, kind="model", payload=payload, expected_cursor=1, usage=usage)
        store.start_run("order-1-child", agent_id="shipper", state={}, parent_run_id=run.run_id)
        store.claim(f"{run.run_id}:effect:charge:1", run_id=run.run_id, worker="w", lease=600)
        store.pause(run.run_id, actor="ops@example.com", reason="look first")
        store.projector().catch_up()  # the read models are made by the store's own role


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def schema_of(url: str) -> str:
    return parse_store_url(url).postgres_schema


def connect_as(dsn: str, role: str, schema: str) -> psycopg.Connection[Any]:
    """A connection as ``role``, the store's schema on its search path (as an analyst's psql)."""
    return psycopg.connect(dsn, user=role, options=f"-c search_path={schema}", autocommit=True)


def readable(conn: psycopg.Connection[Any], relation: str) -> int | None:
    """Rows in ``relation`` as the connection's role sees them; None when refused.

    The name is qualified by the search path's schema: without USAGE on it, an unqualified
    name would not be found at all (rather than refused).
    """
    schema = conn.execute("SHOW search_path").fetchone()[0]  # type: ignore[index]
    try:
        name = sql.Identifier(schema, relation)
        row = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(name))
        return int(row.fetchone()[0])  # type: ignore[index]
    except psycopg.errors.InsufficientPrivilege:
        return None


def assert_analyst(dsn: str, role: str, schema: str) -> None:
    """Every read model answers with rows; every payload table refuses, writes too."""
    with connect_as(dsn, role, schema) as conn:
        rows = {relation: readable(conn, relation) for relation in READ_MODELS}
        assert all(count for count in rows.values()), rows
        refused = {relation: readable(conn, relation) for relation in PAYLOADS}
        assert refused == dict.fromkeys(PAYLOADS), refused
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("DELETE FROM run_status")


def test_the_role_reads_the_read_models_and_nothing_that_holds_payloads(
    roles: Roles, pg_url: str, pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    fill(pg_url)
    role, schema = roles(), schema_of(pg_url)

    code, out, err = cli(capsys, "grant-analyst", role, "--db", pg_url)

    assert code == 0, err
    assert f"granted USAGE ON SCHEMA {schema}" in out
    for relation in READ_MODELS:
        assert f"granted SELECT ON {relation}\n" in out
    for relation in PAYLOADS:
        assert f"revoked ALL ON {relation}\n" in out
    assert_analyst(pg_dsn, role, schema)


def test_a_grant_is_idempotent_and_survives_a_rebuild(
    roles: Roles, pg_url: str, pg_dsn: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    fill(pg_url)
    role, schema = roles(), schema_of(pg_url)
    db_file = tmp_path / "db.url"
    db_file.write_text(pg_url + "\n")

    first = cli(capsys, "grant-analyst", role, "--db-file", str(db_file), "--json")
    again = cli(capsys, "grant-analyst", role, "--db-file", str(db_file), "--json")
    with actae.open(pg_url) as store:
        before = store.projector().query("SELECT 'run_status'::regclass::oid AS oid")
        store.start_run("order-2", agent_id="shipper", state={})  # after the grant
        store.projector().rebuild()
        after = store.projector().query("SELECT 'run_status'::regclass::oid AS oid")

    assert first[0] == again[0] == 0
    assert json.loads(first[1]) == json.loads(again[1])
    assert json.loads(first[1])["role"] == role
    assert before != after  # the rebuild swapped new tables in
    assert_analyst(pg_dsn, role, schema)
    with connect_as(pg_dsn, role, schema) as conn:
        assert readable(conn, "run_status") == 3


def test_revoke_takes_it_back_and_a_rebuild_does_not_grant_it_again(
    roles: Roles, pg_url: str, pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    fill(pg_url)
    role, kept, schema = roles(), roles(), schema_of(pg_url)
    for analyst in (role, kept):
        assert cli(capsys, "grant-analyst", analyst, "--db", pg_url)[0] == 0

    code, out, err = cli(capsys, "grant-analyst", role, "--db", pg_url, "--revoke")
    with actae.open(pg_url) as store:
        store.projector().rebuild()
        analysts = store.projector().query(f"SELECT role FROM {ANALYSTS}")

    assert code == 0, err
    assert f"revoked USAGE ON SCHEMA {schema}" in out
    assert "granted" not in out
    assert analysts == [{"role": kept}]
    with connect_as(pg_dsn, role, schema) as conn:
        assert {relation: readable(conn, relation) for relation in READ_MODELS} == dict.fromkeys(
            READ_MODELS
        )
    assert_analyst(pg_dsn, kept, schema)


def test_a_role_name_that_needs_quoting_is_quoted(
    roles: Roles, pg_url: str, pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    fill(pg_url)
    role = roles(f'Analyst "{uuid.uuid4().hex[:6]}"; DROP TABLE run_status; --')

    code, _, err = cli(capsys, "grant-analyst", role, "--db", pg_url)

    assert code == 0, err
    assert_analyst(pg_dsn, role, schema_of(pg_url))


def test_a_store_owned_by_its_own_login_grants_and_rebuilds_and_refuses_the_owner(
    roles: Roles, pg_url: str, pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    owner, analyst, schema = roles(), roles(), schema_of(pg_url)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        database = sql.Identifier(str(conn.info.dbname))
        grant = sql.SQL("GRANT CREATE ON DATABASE {} TO {}")
        conn.execute(grant.format(database, sql.Identifier(owner)))
    info = conninfo_to_dict(pg_dsn)
    owners_url = (
        f"postgresql://{owner}@{info.get('host', '127.0.0.1')}:{info.get('port', 5432)}/"
        f"{info['dbname']}?schema={schema}"
    )
    try:
        fill(owners_url)
        # granted by a superuser (pg_url connects as one), rebuilt by the owner
        granted = cli(capsys, "grant-analyst", analyst, "--db", pg_url)
        with actae.open(owners_url) as store:
            store.projector().rebuild()
        refused = cli(capsys, "grant-analyst", owner, "--db", owners_url)
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            revoke = sql.SQL("REVOKE CREATE ON DATABASE {} FROM {}")
            conn.execute(revoke.format(database, sql.Identifier(owner)))

    assert granted[0] == 0, granted[2]
    assert_analyst(pg_dsn, analyst, schema)
    assert refused[0] == 2
    assert refused[2] == (
        f"actae: error: invalid ROLE: {owner} owns the store's tables or is a member of "
        f"their owner ({owner}): an analyst needs a role of its own\n"
    )


@pytest.mark.parametrize("url", ["sqlite:///{tmp}/runs.db", "memory://"])
def test_a_store_that_is_not_on_postgresql_is_refused_in_one_line(
    url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = cli(capsys, "grant-analyst", "analyst", "--db", url.format(tmp=tmp_path))

    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith("actae: error: invalid --db: grant-analyst needs a PostgreSQL store")
    assert not (tmp_path / "runs.db").exists()


def test_a_role_that_does_not_exist_is_refused_and_none_is_created(
    pg_url: str, pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    fill(pg_url)
    missing = f"analyst_{uuid.uuid4().hex[:12]}"

    code, out, err = cli(capsys, "grant-analyst", missing, "--db", pg_url)

    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith(f"actae: error: role {missing} not found: create it first")
    assert "DBA" in err
    with psycopg.connect(pg_dsn) as conn:
        exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [missing])
        assert exists.fetchone() is None


def test_roles_that_would_read_the_payloads_anyway_are_refused_and_nothing_is_granted(
    roles: Roles, pg_url: str, pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    fill(pg_url)
    role, schema = roles(), schema_of(pg_url)
    superuser = roles(options="SUPERUSER")
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("GRANT SELECT ON {} TO PUBLIC").format(sql.Identifier(schema, "actae_secrets"))
        )

    leaky = cli(capsys, "grant-analyst", role, "--db", pg_url)
    superuser_refused = cli(capsys, "grant-analyst", superuser, "--db", pg_url)
    predefined = cli(capsys, "grant-analyst", "pg_read_all_data", "--db", pg_url)
    public = cli(capsys, "grant-analyst", "PUBLIC", "--db", pg_url)

    assert leaky[0] == 2
    assert "could still use actae_secrets through PUBLIC" in leaky[2]
    assert "Nothing was granted" in leaky[2]
    with connect_as(pg_dsn, role, schema) as conn:
        assert readable(conn, "run_status") is None  # rolled back: not even the schema
    assert superuser_refused[0] == 2
    assert "is a superuser" in superuser_refused[2]
    for refused in (predefined, public):
        assert refused[0] == 2
        assert "is not a role of its own" in refused[2]
        assert refused[2].count("\n") == 1


def test_a_role_whose_name_holds_braces_is_refused_in_one_line(
    roles: Roles, pg_url: str, pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """PostgreSQL allows ``{}`` in a role's name: the refusal names it, not a traceback."""
    fill(pg_url)
    role, schema = roles(f"analyst_{{{uuid.uuid4().hex[:8]}}}{{}}"), schema_of(pg_url)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("GRANT SELECT ON {} TO PUBLIC").format(sql.Identifier(schema, "actae_secrets"))
        )

    code, out, err = cli(capsys, "grant-analyst", role, "--db", pg_url)

    assert (code, out, err.count("\n")) == (2, "", 1)
    assert f"{role} could still use actae_secrets through PUBLIC" in err
