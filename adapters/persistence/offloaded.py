"""Recorders with no asyncio interface, kept off an async caller's event loop.

sqlite3 blocks on the database's lock and on ``fsync``, so from an ``AsyncStore`` method each
entry point runs in a thread while the coroutine waits (``off_the_loop``; docs/async.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar
from uuid import UUID

from eventsourcing.persistence import Notification, StoredEvent
from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteCursor, SQLiteDatastore

from actae.adapters.persistence import operation_ids
from actae.adapters.persistence.awaiting import blocking, off_the_loop
from actae.adapters.persistence.forgets import (
    KEYS_TABLE,
    SECRETS_TABLE,
    TOKEN_NAME,
    ForgetWatch,
    refuse_keyed,
)
from actae.adapters.persistence.migrations import migrate_sqlite
from actae.adapters.persistence.predecessors import refuse_orphans

T = TypeVar("T")


class ActaeSQLiteRecorder(SQLiteApplicationRecorder):
    """eventsourcing's SQLite application recorder, each entry point off the event loop."""

    def __init__(self, datastore: SQLiteDatastore, events_table_name: str = "stored_events"):
        super().__init__(datastore, events_table_name)
        table = self.events_table_name
        self.insert_events_statement = (
            f"INSERT INTO {table} (originator_id, originator_version, topic, state, operation_id)"  # noqa: S608
            " VALUES (?,?,?,?,?)"
        )
        self._select_operation = f"SELECT * FROM {table} WHERE operation_id = ?"  # noqa: S608
        self._select_version = (
            f"SELECT 1 FROM {table} WHERE originator_id = ? AND originator_version = ?"  # noqa: S608
        )
        self.forgets = ForgetWatch()
        """The forget token read before each read (:mod:`~actae.adapters.persistence.forgets`)."""

    def create_table(self) -> None:
        """The store's tables, as its migrations make them (never eventsourcing's DDL)."""
        with self.datastore.transaction(commit=True) as cursor:
            migrate_sqlite(cursor.sqlite_cursor)  # sqlite3's own: its execute answers rows

    def select_events(self, *args: Any, **kwargs: Any) -> Sequence[StoredEvent]:
        """Events of one aggregate, read after the forget token (no cached key outlives it)."""
        return off_the_loop(self._after_forgets, super().select_events, *args, **kwargs)

    def select_notifications(self, *args: Any, **kwargs: Any) -> Sequence[Notification]:
        """Events in global order, read after the forget token."""
        return off_the_loop(self._after_forgets, super().select_notifications, *args, **kwargs)

    def max_notification_id(self) -> int:
        """The newest event's global position (0 when there is none)."""
        return off_the_loop(super().max_notification_id)

    def _after_forgets(self, read: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``read(*args, **kwargs)`` once :attr:`forgets` knows the token the last forget left."""
        with self.datastore.transaction(commit=False) as c:
            c.execute(f"SELECT value FROM {SECRETS_TABLE} WHERE name = ?", (TOKEN_NAME,))  # noqa: S608
            row = c.fetchone()
        self.forgets.observe(None if row is None else row["value"])
        return read(*args, **kwargs)

    @blocking
    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """Insert events in one transaction, off the event loop; their positions (rowids)."""
        with self.datastore.transaction(commit=True) as c:
            return self._insert_rows(c, stored_events, **kwargs)

    def _insert_rows(
        self, c: SQLiteCursor, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """Insert each row with its operation id; their positions (rowids).

        A forgotten run's rows, or a keyed run's ``in_clear``, are refused after the inserts,
        under the write lock: upgrading a read transaction SQLite refuses at once, unwaited.
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
        owners = kwargs.get("owners", ())  # sorted, unique: the service's
        if owners:  # first, as on PostgreSQL: a forgotten run is refused as forgotten
            marks = ", ".join("?" * len(owners))
            c.execute(
                f"SELECT run_id, wrapped IS NULL FROM {KEYS_TABLE} WHERE run_id IN ({marks})",  # noqa: S608
                [str(owner) for owner in owners],
            )
            refuse_keyed(c.fetchall(), in_clear=bool(kwargs.get("in_clear", False)))
        refuse_orphans(stored_events, lambda s: self._holds_version_before(c, s))
        return positions

    def _holds_version_before(self, c: SQLiteCursor, s: StoredEvent) -> bool:
        """Whether the table holds the version before ``s``'s (asked under the write lock)."""
        originator_id = s.originator_id
        key = originator_id.hex if isinstance(originator_id, UUID) else originator_id
        c.execute(self._select_version, (key, s.originator_version - 1))
        return c.fetchone() is not None

    @blocking
    def select_operation_row(self, operation_id: str) -> StoredEvent | None:
        """The row that carries ``operation_id``, if one does."""
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
