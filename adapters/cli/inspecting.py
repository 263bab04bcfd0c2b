"""Read-only inspection of the event log, printed as JSON.

``head``, ``state``, ``events``, ``recover``, ``run`` and ``lineage`` answer from the
store's own history, never from the read models, and only read: a URL that names no store
is refused, never answered from a new empty store.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from actae.adapters.cli.invocation import invocation
from actae.adapters.cli.options import store_options, whole
from actae.adapters.cli.printing import print_json
from actae.adapters.runtime.store import Store
from actae.adapters.runtime.store import open as open_store


def _answer(db: str | None, db_file: str | None, query: Callable[[Store], Any]) -> int:
    with open_store(invocation().required_url(db, db_file), create=False) as store:
        print_json(query(store))
    return 0


@click.command(help="The receipt of a channel's last event.")
@store_options(required=True)
@click.argument("channel_id")
def head(db: str | None, db_file: str | None, channel_id: str) -> int:
    """``actae head CHANNEL``."""
    return _answer(db, db_file, lambda store: store.head(channel_id))


@click.command(help="The state version in force at a cursor (default: the head).")
@store_options(required=True)
@click.argument("channel_id")
@click.option("--cursor", type=whole(1))
def state(db: str | None, db_file: str | None, channel_id: str, cursor: int | None) -> int:
    """``actae state CHANNEL``."""
    return _answer(db, db_file, lambda store: store.state_at(channel_id, cursor=cursor))


@click.command(help="The events of a channel, in cursor order.")
@store_options(required=True)
@click.argument("channel_id")
@click.option("--after", type=whole(0), default=0, show_default=True)
@click.option("--limit", type=whole(1))
def events(
    db: str | None, db_file: str | None, channel_id: str, after: int, limit: int | None
) -> int:
    """``actae events CHANNEL``."""
    return _answer(db, db_file, lambda store: store.events(channel_id, after=after, limit=limit))


@click.command(help="The state at the head plus the recorded events after it.")
@store_options(required=True)
@click.argument("channel_id")
def recover(db: str | None, db_file: str | None, channel_id: str) -> int:
    """``actae recover CHANNEL``."""
    return _answer(db, db_file, lambda store: store.recover(channel_id))


@click.command(help="A run with its status and head, as the event log has it (JSON).")
@store_options(required=True)
@click.argument("run_id")
def run(db: str | None, db_file: str | None, run_id: str) -> int:
    """``actae run RUN``."""
    return _answer(db, db_file, lambda store: store.run(run_id))


@click.command(help="Fork receipts up and down from a run.")
@store_options(required=True)
@click.argument("run_id")
def lineage(db: str | None, db_file: str | None, run_id: str) -> int:
    """``actae lineage RUN``."""
    return _answer(db, db_file, lambda store: store.lineage(run_id))


COMMANDS = (head, state, events, recover, run, lineage)
