"""What a process may try on a run: every read of its contents and every write to it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import actae


def attempts(
    store: actae.Store, run: actae.RunInfo, effect_key: str, ref: Any
) -> dict[str, Callable[[], object]]:
    """Each read of the run's contents and each write to it, by name (not yet run)."""
    channel = run.channel_id
    return {
        "state": lambda: store.state_at(channel),
        "events": lambda: [event.contents() for event in store.events(channel)],
        "recover": lambda: store.recover(channel),
        "effect": lambda: store.effect(effect_key).result,
        "artifact": lambda: store.open_artifact(ref).read(),
        "record": lambda: store.record(
            channel, kind="late", payload={"x": 1}, expected_cursor=store.head(channel).cursor
        ),
        "transition": lambda: store.transition(
            channel,
            kind="late",
            payload={},
            state={"n": 9},
            expected_version=store.head(channel).state_version,
            expected_cursor=store.head(channel).cursor,
        ),
    }
