"""Every write proves its predecessor: version ``n`` of an aggregate needs version ``n - 1``.

A channel's cursor, an effect's version and a run's version count up from 1 without a gap.
The primary key refuses a version that is taken; this refuses one whose predecessor is
missing, so that a writer whose idea of the head is ahead of the store (a process that
remembers rows a failover to a lagging standby lost) cannot write past the hole. The check
is part of the write itself: a guard inside the one statement on PostgreSQL
(:meth:`~actae.adapters.persistence.postgres.ActaePostgresRecorder.insert_statement`), a
lookup inside the write transaction on SQLite (``memory://`` too). A
predecessor written in the same batch counts. Whatever a process guesses about heads, the
database decides (docs/outages.md, "Failovers that lose commits").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from eventsourcing.persistence import IntegrityError, StoredEvent


class PredecessorMissing(IntegrityError):  # noqa: N818 - eventsourcing's naming of refusals
    """The store holds no version ``n - 1`` of an aggregate a write gave version ``n``.

    An ``IntegrityError``, like a taken version: the command re-reads what is stored and
    decides again, and a process that finds the store behind what it saw stops
    (``HistoryRegressedError``).
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
    """The first event after version 1 whose predecessor is neither in the batch nor ``stored``.

    ``stored(event)`` says whether the store holds the version before ``event``'s.
    """
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
