"""Who runs an analyst's SQL on PostgreSQL: projector.query runs as the store's role.

``projector.query`` keeps a statement from writing (one statement, a read-only transaction,
a connection reset after it), but a read-only transaction does not stop a function the
store's role may call: a privileged store role still reads server files and ends other
backends through it. Decided (docs/data.md, "An analyst role"): projector.query does not
switch roles, because Actae's own components read private tables through it (the drill's
leases, the analysts table) and there may be no analyst role, or several; the way to give SQL
to people is a login role of their own granted by ``actae grant-analyst``. These tests pin
both halves: what projector.query runs as, and that such a role is refused those functions.
"""

from __future__ import annotations

import psycopg
import pytest

import actae
from tests.integration.test_grant_analyst import Roles, cli, connect_as, fill, roles, schema_of

pytestmark = pytest.mark.postgres
__all__ = ["roles"]  # the fixture, imported to be used here


def test_projector_query_runs_as_the_stores_role_in_a_read_only_transaction(
    pg_url: str,
) -> None:
    with actae.open(pg_url) as store:
        projector = store.projector()
        (row,) = projector.query(
            "SELECT current_user AS role, current_setting('transaction_read_only') AS ro"
        )
        assert row == {"role": "postgres", "ro": "on"}
        # the store's role is a superuser here: its functions run (the documented limit)
        assert projector.query("SELECT length(pg_read_file('PG_VERSION')) > 0 AS read") == [
            {"read": True}
        ]


def test_an_analyst_role_is_refused_server_files_and_other_backends(
    roles: Roles, pg_url: str, pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    fill(pg_url)
    role, schema = roles(), schema_of(pg_url)
    assert cli(capsys, "grant-analyst", role, "--db", pg_url)[0] == 0

    with psycopg.connect(pg_dsn, autocommit=True) as store_side:
        (pid,) = store_side.execute("SELECT pg_backend_pid()").fetchone() or (None,)
        with connect_as(pg_dsn, role, schema) as analyst:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                analyst.execute("SELECT pg_read_file('PG_VERSION')")
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                analyst.execute("SELECT pg_terminate_backend(%s)", [pid])
        assert store_side.execute("SELECT 1").fetchone() == (1,)  # still alive
