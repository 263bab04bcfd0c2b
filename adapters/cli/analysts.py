"""``actae grant-analyst ROLE``: let a PostgreSQL role read the read models, and nothing else.

The SQL is :mod:`actae.adapters.readside.grants`; this command checks the store is on
PostgreSQL, catches its read models up (so every table and view exists), and prints what was
granted and revoked.
"""

from __future__ import annotations

from typing import cast

import click

from actae.adapters.cli.opening import invocation
from actae.adapters.cli.options import as_json, store_options
from actae.adapters.cli.printing import console, print_json
from actae.adapters.operate import views
from actae.adapters.persistence.url import parse_store_url
from actae.adapters.readside import grants
from actae.adapters.readside.readmodels import PostgresReadModels
from actae.adapters.runtime.backends import backend_for
from actae.adapters.runtime.store import open as open_store
from actae.projections.tables import TABLES, VIEWS

HELP = f"""Let the PostgreSQL role ROLE query the read models in SQL, and nothing else.

Grants USAGE on the store's schema and SELECT on the read-model tables
({", ".join(t.name for t in TABLES)}) and views ({", ".join(v.name for v in VIEWS)}),
catching them up first so that they exist; revokes every privilege on the tables that hold
payloads or their keys (the events, the projector's bookkeeping, actae_migrations and the
custody tables: actae_data_keys, actae_artifacts, actae_artifact_chunks, actae_artifact_refs,
actae_secrets). The role is remembered in actae_analysts, so a rebuild (actae project
--rebuild) grants its fresh tables to it. Safe to run again; --revoke takes it back.

ROLE must exist: this command creates no role (creating logins is the DBA's job: CREATE ROLE
name LOGIN ...); grant to a group role to cover many analysts. Its name is matched exactly
(case-sensitive). Refused, with nothing changed: a superuser or the owner of the store's
tables (they read everything), and a role that could still read a payload table through
PUBLIC or another role it belongs to. Run it as the owner of the store's tables (or a
superuser). PostgreSQL only.
"""


@click.command(
    name="grant-analyst",
    help=HELP,
    short_help="Let a PostgreSQL role read the read models, and nothing else.",
)
@store_options(required=True)
@click.argument("role")
@click.option(
    "--revoke",
    is_flag=True,
    help="take it back: revoke the read models and the schema from ROLE, and stop "
    "granting rebuilt tables to it",
)
@as_json
def grant_analyst(role: str, revoke: bool, as_json: bool) -> int:
    """``actae grant-analyst ROLE``."""
    url = invocation().required_url()
    backend_for(parse_store_url(url)).server(
        "--db", needed_by="grant-analyst ", missing="roles to grant to"
    )
    grants.check_role_name(role)
    with open_store(url, create=False) as store:
        views.fresh(store)
        read_models = cast("PostgresReadModels", store.projector().db)  # the server said so
        access = (grants.revoke if revoke else grants.grant)(read_models, role)
    if as_json:
        print_json(access)
        return 0
    out = console()
    out.print(f"{'revoke' if revoke else 'grant'}-analyst {access.role} (schema {access.schema})")
    for line in access.granted:
        out.print(f"  granted {line}")
    for line in access.revoked:
        out.print(f"  revoked {line}")
    return 0


COMMANDS: list[click.Command] = [grant_analyst]
