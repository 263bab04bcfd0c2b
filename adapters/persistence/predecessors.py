"""Every write proves its predecessor: version ``n`` of an aggregate needs version ``n - 1``.

The primary key refuses a version that is taken; this refuses one whose predecessor is
missing, so a writer whose head is ahead of the store (after a failover to a lagging standby
lost rows) cannot write past the hole. It is part of the write: a guard in the one statement
on PostgreSQL, a lookup in the write transaction on SQLite (docs/outages.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from eventsourcing.persistence import IntegrityError, StoredEvent


class PredecessorMissing(IntegrityError):  # noqa: N818 - eventsourcing's naming of refusals
    """The store holds no version ``n - 1`` of an aggregate a write gave version ``n``.

    An ``IntegrityError`` like a taken version: the command re-reads and decides again.
    """

    def __init__(self, originator_id: object, version: int) -> None:
        self.originator_id = originator_id
        self.version = version
        super().__init__(
            f"version {version} of {originator_id} refused: the store holds no version "
            f"{version - 1} before it"
        )


def first_orphan(
    stored_events: Sequence[StoredEvent], stored: Callable[[StoredEvent], bool]
) -> StoredEvent | None:
    """The first event after version 1 whose predecessor is neither in the batch nor ``stored``."""
    batch = {(str(s.originator_id), s.originator_version) for s in stored_events}
    for s in stored_events:
        version = s.originator_version
        if version > 1 and (str(s.originator_id), version - 1) not in batch and not stored(s):
            return s
    return None


def refuse_orphans(
    stored_events: Sequence[StoredEvent], stored: Callable[[StoredEvent], bool]
) -> None:
    """Raise :class:`PredecessorMissing` for the first event whose predecessor is missing."""
    orphan = first_orphan(stored_events, stored)
    if orphan is not None:
        raise PredecessorMissing(orphan.originator_id, orphan.originator_version)
