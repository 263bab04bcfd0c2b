"""Read-only inspection of the event log as JSON: the store's own history, never the read models."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from actae.adapters.cli.opening import decorated, invocation, store_options, whole
from actae.adapters.cli.printing import print_json
from actae.adapters.runtime.store import open as open_store


def _reading(
    name: str, help: str, argument: str, *options: Callable[[Any], Any], method: str = ""
) -> click.Command:
    """``actae NAME ARGUMENT``: the store's ``method`` (default ``NAME``) of it, as JSON."""

    def answer(**given: Any) -> None:
        target = given.pop(argument)
        with open_store(invocation().required_url(), create=False) as store:
            print_json(getattr(store, method or name)(target, **given))

    answer = decorated(answer, store_options(required=True), click.argument(argument), *options)
    return click.command(name, help=help)(answer)


COMMANDS = (
    _reading("head", "The receipt of a channel's last event.", "channel_id"),
    _reading(
        "state",
        "The state version in force at a cursor (default: the head).",
        "channel_id",
        click.option("--cursor", type=whole(1)),
        method="state_at",
    ),
    _reading(
        "events",
        "The events of a channel, in cursor order.",
        "channel_id",
        click.option("--after", type=whole(0), default=0, show_default=True),
        click.option("--limit", type=whole(1)),
    ),
    _reading("recover", "The state at the head plus the recorded events after it.", "channel_id"),
    _reading("run", "A run with its status and head, as the event log has it (JSON).", "run_id"),
    _reading("lineage", "Fork receipts up and down from a run.", "run_id"),
)
