"""``actae retention``: purge the finished runs whose policy's time has passed.

The policies are set in code (``store.set_retention``) and stored as audited events; this
command applies them once, as workers do every ``--retention-every`` seconds. ``--dry-run``
lists what would go. ``actae hold`` and ``actae release`` place and lift legal holds.
"""

from __future__ import annotations

import click

from actae.adapters.cli.opening import invocation
from actae.adapters.cli.options import as_json, store_options
from actae.adapters.cli.printing import console, print_json
from actae.adapters.runtime.store import open as open_store


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
        print_json(
            {
                "policies": policies,
                "dry_run": report.dry_run,
                "examined": report.examined,
                "purged": [str(run_id) for run_id in report.purged],
                "held": report.held,
                "events_deleted": report.events_deleted,
                "artifacts_deleted": report.artifacts_deleted,
                "seconds": round(report.seconds, 3),
            }
        )
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


COMMANDS: list[click.Command] = [retention]
