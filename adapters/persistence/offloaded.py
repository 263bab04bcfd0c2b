"""Recorders with no asyncio interface, kept off an async caller's event loop.

sqlite3 blocks: on the file lock (up to the lock timeout) and on ``fsync``. The in-memory
recorder does not wait on IO, but a caller that awaited it on the loop would never yield:
measured with 32 writers, a ticker on the loop woke 20 ms late at the median, against 5 ms
with the calls in worker threads at the same rate (docs/async.md). So, called from an
``AsyncStore`` method (a greenback portal), each entry point of these recorders runs in a
worker thread while the coroutine waits (:func:`~actae.adapters.persistence.awaiting.
off_the_loop`); a synchronous caller calls straight through, as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import (
    ApplicationRecorder,
    IntegrityError,
    Notification,
    StoredEvent,
)
from eventsourcing.popo import POPOApplicationRecorder
from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteCursor, SQLiteDatastore

from actae.adapters.persistence import operation_ids
from actae.adapters.persistence.awaiting import off_the_loop
from actae.adapters.persistence.forgets import (
    KEYS_TABLE,
    SECRETS_TABLE,
    TOKEN_NAME,
    ForgetWatch,
    owners_of,
    refuse_forgotten,
    tables_read,
)
from actae.adapters.persistence.migrations import SQLITE_CUSTODY_TABLES
from actae.adapters.persistence.predecessors import refuse_orphans


class OffTheLoop(ApplicationRecorder):
    """The recorder's entry points, each off the event loop inside a portal.

    Mixed in before an eventsourcing recorder, whose methods ``super()`` reaches (mypy sees
    only the abstract ones of ``ApplicationRecorder``, hence the ``safe-super`` ignores).
    """

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """Insert events atomically; their positions."""
        return off_the_loop(super().insert_events, stored_events, **kwargs)  # type: ignore[safe-super]

    def select_events(
        self,
        originator_id: UUID | str,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
    ) -> Sequence[StoredEvent]:
        """Events of one aggregate."""
        return off_the_loop(
            super().select_events,  # type: ignore[safe-super]
            originator_id,
            gt=gt,
            lte=lte,
            desc=desc,
            limit=limit,
        )

    def select_notifications(
        self,
        start: int | None,
        limit: int,
        stop: int | None = None,
        topics: Sequence[str] = (),
        *,
        inclusive_of_start: bool = True,
    ) -> Sequence[Notification]:
        """Events in global order from ``start``."""
        return off_the_loop(
            super().select_notifications,  # type: ignore[safe-super]
            start,
            limit,
            stop,
            topics,
            inclusive_of_start=inclusive_of_start,
        )

    def max_notification_id(self) -> int:
        """The newest event's global position (0, or None in memory, when there is none)."""
        return off_the_loop(super().max_notification_id)  # type: ignore[safe-super,return-value]


class ActaeSQLiteRecorder(OffTheLoop, SQLiteApplicationRecorder):
    """eventsourcing's SQLite application recorder, off the event loop in a portal.

    Its table has the ``operation_id`` column (:mod:`actae.adapters.persistence.operation_ids`),
    added by ``create_table`` to a table of an earlier schema.
    """

    def __init__(self, datastore: SQLiteDatastore, events_table_name: str = "stored_events"):
        super().__init__(datastore, events_table_name)
        self.insert_events_statement = operation_ids.sqlite_insert_statement(self.events_table_name)
        self._select_operation = operation_ids.sqlite_select_statement(self.events_table_name)
        self._select_version = (
            f"SELECT 1 FROM {self.events_table_name}"  # noqa: S608 - our own table's name
            " WHERE originator_id = ? AND originator_version = ?"
        )
        self.forgets = ForgetWatch()
        """The forget token read before each read (:mod:`~actae.adapters.persistence.forgets`)."""

    def create_table(self) -> None:
        """The table (eventsourcing's), then its operation ids and their unique index.

        SQLite opens create tables every time: a table already migrated is only read.
        """
        super().create_table()
        with self.datastore.transaction(commit=True) as cursor:
            for statement in tables_read(SQLITE_CUSTODY_TABLES):  # the forget guards read them
                cursor.execute(statement)
        with self.datastore.transaction(commit=False) as cursor:
            if operation_ids.sqlite_has_them(cursor, self.events_table_name):
                return
        with self.datastore.transaction(commit=True) as cursor:
            operation_ids.add_to_sqlite(cursor, self.events_table_name)

    def select_events(
        self,
        originator_id: UUID | str,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
    ) -> Sequence[StoredEvent]:
        """Events of one aggregate, read after the forget token (no cached key outlives it)."""
        off_the_loop(self._observe_forgets)
        return super().select_events(originator_id, gt=gt, lte=lte, desc=desc, limit=limit)

    def select_notifications(
        self,
        start: int | None,
        limit: int,
        stop: int | None = None,
        topics: Sequence[str] = (),
        *,
        inclusive_of_start: bool = True,
    ) -> Sequence[Notification]:
        """Events in global order, read after the forget token."""
        off_the_loop(self._observe_forgets)
        return super().select_notifications(
            start, limit, stop, topics, inclusive_of_start=inclusive_of_start
        )

    def _observe_forgets(self) -> None:
        """Tell :attr:`forgets` the token the last forget left (in process: no round trip)."""
        with self.datastore.transaction(commit=False) as c:
            c.execute(f"SELECT value FROM {SECRETS_TABLE} WHERE name = ?", (TOKEN_NAME,))  # noqa: S608
            row = c.fetchone()
        self.forgets.observe(None if row is None else row["value"])

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """Insert events in one transaction, off the event loop; their positions (rowids)."""
        return off_the_loop(self._insert_in_transaction, stored_events, kwargs)

    def _insert_in_transaction(
        self, stored_events: Sequence[StoredEvent], kwargs: dict[str, Any]
    ) -> Sequence[int] | None:
        with self.datastore.transaction(commit=True) as c:
            return self._insert_rows(c, stored_events, **kwargs)

    def _insert_rows(
        self, c: SQLiteCursor, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """Insert each row with its operation id; their positions (rowids).

        Refused, in the same transaction, if a run whose contents the rows hold was
        forgotten (its data key destroyed): ``ForgottenError``, and the transaction rolls
        back, nothing written. Checked after the inserts: by then the transaction holds
        the write lock, so it reads the latest commit; a read first would make the insert
        upgrade a read transaction, which SQLite refuses at once ("database is locked")
        instead of waiting for another writer.
        """
        positions = []
        for s in stored_events:
            originator_id = s.originator_id
            c.execute(
                self.insert_events_statement,
                (
                    originator_id.hex if isinstance(originator_id, UUID) else originator_id,
                    s.originator_version,
                    s.topic,
                    s.state,
                    operation_ids.operation_id_of(s),
                ),
            )
            positions.append(c.lastrowid)
        owners = owners_of(kwargs)
        if owners:  # first, as on PostgreSQL: a forgotten run is refused as forgotten
            marks = ", ".join("?" * len(owners))
            c.execute(
                f"SELECT run_id FROM {KEYS_TABLE} WHERE wrapped IS NULL AND run_id IN ({marks})",  # noqa: S608
                [str(owner) for owner in owners],
            )
            refuse_forgotten(row[0] for row in c.fetchall())
        refuse_orphans(stored_events, lambda s: self._holds_version_before(c, s))
        return positions

    def _holds_version_before(self, c: SQLiteCursor, s: StoredEvent) -> bool:
        """Whether the table holds the version before ``s``'s (asked inside the write).

        Asked after the inserts, so the write lock is already taken: a read first would
        start the transaction as a reader that another writer can overtake.
        """
        originator_id = s.originator_id
        key = originator_id.hex if isinstance(originator_id, UUID) else originator_id
        c.execute(self._select_version, (key, s.originator_version - 1))
        return c.fetchone() is not None

    def select_operation_row(self, operation_id: str) -> StoredEvent | None:
        """The row that carries ``operation_id``, if one does."""
        return off_the_loop(self._operation_row, operation_id)

    def _operation_row(self, operation_id: str) -> StoredEvent | None:
        with self.datastore.transaction(commit=False) as c:
            c.execute(self._select_operation, (operation_id,))
            row = c.fetchone()
        if row is None:
            return None
        return StoredEvent(
            originator_id=self.convert_originator_id(row["originator_id"]),
            originator_version=row["originator_version"],
            topic=row["topic"],
            state=row["state"],
        )


class ActaeMemoryRecorder(OffTheLoop, POPOApplicationRecorder):
    """eventsourcing's in-memory application recorder, off the event loop in a portal.

    A deleted event (retention's purge) leaves a hole at its position, so that positions
    keep their meaning; reads in global order step over holes. Operation ids are kept
    unique as the other backends' index keeps them, and every version after the first
    needs its predecessor (:mod:`actae.adapters.persistence.predecessors`).
    """

    def __init__(self) -> None:
        super().__init__()
        self._operation_rows: dict[str, tuple[str, int]] = {}

    def _assert_uniqueness(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> None:
        super()._assert_uniqueness(stored_events, **kwargs)
        index = self._stored_events_index
        refuse_orphans(
            stored_events, lambda s: s.originator_version - 1 in index.get(str(s.originator_id), ())
        )
        keys = operation_ids.carried_ids(stored_events)
        if len(set(keys)) < len(keys) or any(key in self._operation_rows for key in keys):
            msg = f"operation ids already recorded: {keys}"
            raise IntegrityError(msg)

    def _update_table(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        positions = super()._update_table(stored_events, **kwargs)
        for s in stored_events:
            key = operation_ids.operation_id_of(s)
            if key is not None:
                self._operation_rows[key] = (str(s.originator_id), s.originator_version)
        return positions

    def select_operation_row(self, operation_id: str) -> StoredEvent | None:
        """The row that carries ``operation_id``, if one does."""
        with self._database_lock:
            found = self._operation_rows.get(operation_id)
            if found is None:
                return None
            originator_id, version = found
            return self._stored_events[self._stored_events_index[originator_id][version]]

    def events_after(self, position: int, cap: int) -> int:
        """Events after ``position``, holes not counted, at most ``cap``."""
        with self._database_lock:
            later = self._stored_events[position:]  # position n is at index n - 1
            return min(cap, sum(1 for event in later if event.topic != HOLE.topic))

    def still_stored(self, originator_ids: Sequence[UUID]) -> set[UUID]:
        """Which of these still have events (see :mod:`actae.adapters.persistence.purging`)."""
        with self._database_lock:
            index = self._stored_events_index
            return {i for i in originator_ids if index.get(str(i))}

    def delete_events(
        self, everything_of: Sequence[UUID], history_of: Sequence[UUID], keep_topic: str
    ) -> int:
        """Delete events as :func:`actae.adapters.persistence.purging.delete_events` says."""
        deleted = 0
        with self._database_lock:
            for ids, keep in ((everything_of, None), (history_of, keep_topic)):
                for originator_id in ids:
                    index = self._stored_events_index[str(originator_id)]
                    for version, position in list(index.items()):
                        if keep is not None and self._stored_events[position].topic == keep:
                            continue
                        key = operation_ids.operation_id_of(self._stored_events[position])
                        if key is not None:
                            self._operation_rows.pop(key, None)
                        self._stored_events[position] = HOLE
                        del index[version]
                        deleted += 1
        return deleted

    def select_notifications(
        self,
        start: int | None,
        limit: int,
        stop: int | None = None,
        topics: Sequence[str] = (),
        *,
        inclusive_of_start: bool = True,
    ) -> Sequence[Notification]:
        """Events in global order from ``start``, holes left out (``limit`` counts events)."""
        found: list[Notification] = []
        while len(found) < limit:
            page = super().select_notifications(
                start, limit, stop, topics, inclusive_of_start=inclusive_of_start
            )
            if not page:
                break
            found.extend(n for n in page if n.topic != HOLE.topic)
            start, inclusive_of_start = page[-1].id, False
        return found[:limit]


HOLE = StoredEvent(originator_id=UUID(int=0), originator_version=0, topic="", state=b"")
"""What a deleted event leaves in the in-memory store's list."""
