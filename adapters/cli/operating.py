"""The operator's commands: find runs, look into one, act on it (audited, never an edit).

Reads catch the read models up first, so they show what the log holds now.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click
import orjson
from rich.console import Group

from actae.adapters.cli.opening import (
    actor,
    as_json,
    decorated,
    invocation,
    page_limit,
    reason,
    store_options,
)
from actae.adapters.cli.printing import (
    AUDIT_COLUMNS,
    EFFECT_COLUMNS,
    RUN_COLUMNS,
    counts_line,
    report,
    run_panel,
    table,
)
from actae.adapters.operate import actions, views
from actae.adapters.operate.prefixes import resolve_effect, resolve_run
from actae.adapters.runtime.store import Store
from actae.adapters.runtime.store import open as open_store
from actae.domain.errors import ValidationError
from actae.domain.values import RunStatus


@contextmanager
def _store() -> Iterator[Store]:
    """The store (never created by an operator's command), with its read models caught up."""
    with open_store(invocation().required_url(), create=False) as store:
        store.projector().catch_up()
        yield store


@click.command()
@store_options(required=True)
@click.option(
    "--status",
    type=click.Choice([s.value for s in RunStatus]),
    help="only runs with this status (running = executing)",
)
@click.option("--workflow", metavar="W", help="only runs of this workflow id")
@click.option("--agent", metavar="A", help="only runs of this agent id")
@page_limit
@click.option("--after", metavar="RUN", help="the page after this run (the last one shown)")
@as_json
def runs(after: str | None, as_json: bool, **filters: Any) -> int:
    """List runs, newest first, with what each should do next."""
    with _store() as store:
        last = None if after is None else resolve_run(store, after)
        rows = views.runs(store, after=last, **filters)
        counts = views.status_counts(store)
    shown = Group(counts_line(counts), table(RUN_COLUMNS, rows) if rows else "no runs match")
    return report(shown, {"runs": rows, "counts": counts}, as_json)


@click.command(
    help="One run: status, waiting reason, next action, pins, state version, "
    "cursor, effects, forks and children, usage and cost."
)
@store_options(required=True)
@click.argument("run")
@as_json
def show(run: str, as_json: bool) -> int:
    """``actae show RUN``."""
    with _store() as store:
        view = views.run_view(store, resolve_run(store, run))
    document = {
        "run": view.info,
        "status": view.status,
        "next_action": view.next_action,
        "read_model": view.row,
        "effects": view.effects,
        "parents": view.parents,
        "children": view.children,
    }
    return report(run_panel(view), document, as_json)


@click.command()
@store_options(required=True)
@click.option("--in-doubt", is_flag=True, help="only effects in doubt")
@click.option("--run", metavar="RUN", help="only this run's effects")
@page_limit
@as_json
def effects(in_doubt: bool, run: str | None, limit: int, as_json: bool) -> int:
    """List ledger effects; --in-doubt shows the ones that may have happened."""
    with _store() as store:
        run_id = None if run is None else resolve_run(store, run)
        rows = views.effects(store, in_doubt=in_doubt, run_id=run_id, limit=limit)
    return report(table(EFFECT_COLUMNS, rows) if rows else "no effects match", rows, as_json)


@click.command()
@store_options(required=True)
@click.argument("run")
@as_json
def audit(run: str, as_json: bool) -> int:
    """Every operator action on a run and its effects: actor, time and reason."""
    with _store() as store:
        rows = views.audit(store, resolve_run(store, run))
    shown = table(AUDIT_COLUMNS, rows) if rows else "no operator actions on this run"
    return report(shown, rows, as_json)


RUN_HELP = {
    "approve": "Approve the approval NAME a run waits for (or will wait for).",
    "deny": "Deny the approval NAME a run waits for (or will wait for).",
    "cancel": "Cancel a run: it stops for good (its open effects stay in the ledger).",
    "pause": "Pause a run: no worker takes it until it is unpaused.",
    "unpause": "Unpause a run: it goes back to what it was doing.",
    "retry": "Send a failed run back to running, to try again from where it failed.",
    "forget": "Destroy a run's contents for good (its data key): its structure and audit "
    "stay. Only for runs written with encryption on (open the store with ?keyring=).",
    "hold": "Place a legal hold on a run: retention never purges it until it is released.",
    "release": "Lift a run's legal hold: retention applies to it again.",
}
if RUN_HELP.keys() != {*actions.DECISIONS, *actions.RUN_ACTIONS}:  # a verb is a CLI command too
    raise ImportError("every operator verb needs its CLI help in RUN_HELP, and only those")
DECIDING = (click.argument("name"), actor, click.option("--note", help="kept with the decision"))


def _on_run(verb: str) -> click.Command:
    """``actae VERB RUN``: an answer to the run's approval NAME, or an action for ``--reason``."""

    def command(run: str, actor: str, as_json: bool, **given: Any) -> int:
        with _store() as store:
            run_id = resolve_run(store, run)
            if verb in actions.DECISIONS:
                name = given.pop("name")
                info = actions.DECISIONS[verb](store, run_id, name, actor=actor, **given)
                past = "approved" if verb == "approve" else "denied"
                shown = f"{past} {name} for run {info.run_id}: now {info.status}"
            else:
                info = actions.RUN_ACTIONS[verb](store, run_id, actor=actor, **given)
                shown = f"{verb}: run {info.run_id} is now {info.status}"
        return report(shown, info, as_json)

    options = DECIDING if verb in actions.DECISIONS else (actor, reason)
    command = decorated(
        command, store_options(required=True), click.argument("run"), *options, as_json
    )
    return click.command(name=verb, help=RUN_HELP[verb])(command)


def _json_value(option: str) -> Callable[[click.Context, click.Parameter, str | None], Any]:
    def parse(_: click.Context, __: click.Parameter, text: str | None) -> Any:
        if text is None:
            return None
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError as error:
            raise ValidationError(option, f"not JSON: {error}") from None

    return parse


@click.command(
    help="Settle an effect in doubt (or needing review) by what the provider says happened: "
    "completed (with --result, what the workflow's effect returns) or failed (it did not "
    "happen; the run tries again)."
)
@store_options(required=True)
@click.argument("effect")
@click.argument("outcome", type=click.Choice(actions.OUTCOMES))
@actor
@reason
@click.option(
    "--evidence",
    required=True,
    metavar="JSON",
    callback=_json_value("--evidence"),
    help='what shows it, a JSON object, e.g. \'{"provider_ref": "ch_123"}\'',
)
@click.option("--result", metavar="JSON", callback=_json_value("--result"), help="a JSON value")
@as_json
def override(effect: str, outcome: str, as_json: bool, **settled: Any) -> int:
    """``actae override EFFECT completed|failed``."""
    with _store() as store:
        key = resolve_effect(store, effect)
        info = store.override(key, outcome, **settled)
    return report(f"override: effect {key} is now {info.status}", info, as_json)


COMMANDS = (runs, show, effects, audit, *(_on_run(verb) for verb in RUN_HELP), override)
