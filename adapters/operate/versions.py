"""State versions by number (a binary search over cursors: versions only grow), and their diff."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

import orjson

from actae.adapters.runtime.store import Store
from actae.domain.errors import NotFoundError
from actae.domain.validation import require_int
from actae.domain.values import StateVersion

SORTED = orjson.OPT_SORT_KEYS


def state_version(store: Store, channel_id: UUID, version: int) -> StateVersion:
    """The channel's state version ``version`` (``NotFoundError`` if the channel never had it)."""
    version = require_int("version", version, minimum=1)
    head = store.head(channel_id)
    low, high = 1, head.cursor
    while low < high:  # the first cursor whose version in force is at least ``version``
        middle = (low + high) // 2
        (event,) = store.events(channel_id, after=middle - 1, limit=1)
        if event.state_version >= version:
            high = middle
        else:
            low = middle + 1
    found = store.state_at(channel_id, low)
    if found.version != version:
        raise NotFoundError(
            "state version",
            version,
            f"channel {channel_id} has versions {store.state_at(channel_id, 1).version} "
            f"to {head.state_version}",
        )
    return found


@dataclass(frozen=True)
class Change:
    """One difference between two JSON documents, at ``path`` (keys from the top)."""

    path: tuple[str, ...]
    kind: str  # added, removed or changed
    before: Any = None
    after: Any = None


def diff(before: Any, after: Any, path: tuple[str, ...] = ()) -> list[Change]:
    """Keys added, removed or changed, objects to any depth; other values compared whole.

    ``1``, ``1.0`` and ``true`` differ, as they do in JSON.
    """
    if isinstance(before, dict) and isinstance(after, dict):
        changes: list[Change] = []
        for key in sorted(before.keys() | after.keys()):
            where = (*path, key)
            if key not in after:
                changes.append(Change(where, "removed", before=before[key]))
            elif key not in before:
                changes.append(Change(where, "added", after=after[key]))
            else:
                changes.extend(diff(before[key], after[key], where))
        return changes
    same = orjson.dumps(before, option=SORTED) == orjson.dumps(after, option=SORTED)
    return [] if same else [Change(path, "changed", before=before, after=after)]
