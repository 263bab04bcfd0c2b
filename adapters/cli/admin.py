"""Administering a store: its keyring (``keys``), retention and analysts' SQL access."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import cast

import click

from actae.adapters.cli.opening import as_json, invocation, store_options
from actae.adapters.cli.printing import console, print_json, report
from actae.adapters.custody.keyring import load_keyring, new_keyring, save_keyring
from actae.adapters.persistence.url import parse_store_url
from actae.adapters.readside import grants
from actae.adapters.readside.readmodels import PostgresReadModels
from actae.adapters.runtime.backends import backend_for
from actae.adapters.runtime.store import open as open_store
from actae.projections.tables import TABLES, VIEWS


@click.group()
def keys() -> None:
    """Make and rotate the keyring that encrypts a store at rest."""


@keys.command(
    "new",
    help="Write a new keyring file with one master key (mode 0600; never overwrites). Keep "
    "it apart from the database and its backups: a backup is only restorable with it.",
)
@click.option("--out", required=True, metavar="PATH", help="where to write the keyring")
@as_json
def new(out: str, as_json: bool) -> None:
    """Write a fresh keyring to ``out``."""
    keyring = new_keyring()
    save_keyring(keyring, out, replace=False)
    shown = (
        f"wrote {out} with master key {keyring.current}\n"
        f"open the store with ?keyring={Path(out).resolve()} (or keyring=)"
    )
    report(shown, {"keyring": out, "current": keyring.current}, as_json)


@keys.command(
    "rotate",
    help="Add a master key to the keyring, make it current, and re-wrap every run's data "
    "key under it. Payloads are not touched; safe to run while workers write and to run "
    "again after an interruption. The old keys stay in the file (references signed with "
    "them are still checked with them).",
)
@click.option("--keyring", "keyring_path", required=True, metavar="PATH", help="the keyring file")
@store_options(required=True)
@as_json
def rotate(keyring_path: str, as_json: bool) -> None:
    """Rotate the master key of the store at ``--db``."""
    url = invocation().required_url()
    rotated = load_keyring(keyring_path).with_new_key()
    with open_store(url, keyring=keyring_path, create=False):
        pass  # the store opens with the current keyring before the file changes
    save_keyring(rotated, keyring_path, replace=True)
    with open_store(url, keyring=keyring_path, create=False) as store:
        count = store.rotate_keys()
    shown = (
        f"master key {rotated.current} is current in {keyring_path}\n"
        f"re-wrapped {count} data key{'s' if count != 1 else ''}"
    )
    report(
        shown, {"keyring": keyring_path, "current": rotated.current, "rewrapped": count}, as_json
    )


@click.command(
    help="Purge the finished runs whose end plus their retention policy's time has passed: "
    "their events, data keys and unshared artifacts go, a tombstone and their lineage stay. "
    "Runs on legal hold are kept. The policies are set with store.set_retention."
)
@store_options(required=True)
@click.option("--dry-run", is_flag=True, help="say what would be purged, change nothing")
@click.option(
    "--as",
    "actor",
    default="actae retention",
    show_default=True,
    metavar="ACTOR",
    help="who purges (recorded in each tombstone and the audit log)",
)
@click.option(
    "--limit",
    type=click.IntRange(1, 1_000_000),
    default=10_000,
    show_default=True,
    metavar="N",
    help="at most N runs this time (run again for more)",
)
@as_json
def retention(dry_run: bool, actor: str, limit: int, as_json: bool) -> int:
    """``actae retention``."""
    url = invocation().required_url()
    with open_store(url, create=False) as store:
        policies = store.retention()
        report = store.apply_retention(actor=actor, dry_run=dry_run, limit=limit)
    if as_json:
        print_json({"policies": policies, **asdict(report), "seconds": round(report.seconds, 3)})
        return 0
    out = console()
    if not policies:
        out.print("no retention policy is set: every run is kept (store.set_retention)")
        return 0
    for agent, policy in policies.items():
        kept = "forever" if policy is None else ", ".join(f"{s} {t}" for s, t in policy.items())
        out.print(f"policy {agent}: {kept}")
    verb = "would purge" if report.dry_run else "purged"
    out.print(
        f"{verb} {len(report.purged)} of {report.examined} finished runs looked at "
        f"({report.held} kept by a legal hold) in {report.seconds:.1f} s"
    )
    if not report.dry_run:
        out.print(
            f"deleted {report.events_deleted} events and {report.artifacts_deleted} artifacts"
        )
    for run_id in report.purged[:20]:
        out.print(f"  {run_id}")
    if len(report.purged) > 20:
        out.print(f"  ... and {len(report.purged) - 20} more (--json lists them all)")
    return 0


ANALYST_HELP = f"""Let the PostgreSQL role ROLE query the read models in SQL, and nothing else.

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
    help=ANALYST_HELP,
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
        store.projector().catch_up()
        read_models = cast("PostgresReadModels", store.projector().db)  # the server said so
        access = (grants.revoke if revoke else grants.grant)(read_models, role)
    lines = [
        f"{'revoke' if revoke else 'grant'}-analyst {access.role} (schema {access.schema})",
        *(f"  granted {line}" for line in access.granted),
        *(f"  revoked {line}" for line in access.revoked),
    ]
    return report("\n".join(lines), access, as_json)


COMMANDS: list[click.Command] = [keys, retention, grant_analyst]
