"""Writes whose reply was lost: recognised as the caller's own commit, not repeated.

A write whose outcome a connection error left unknown is sent again. Refused for rows at its
(aggregate, version) pairs, they are read back: equal in topic and state bytes (which hold
a timestamp and the full content), they are its first attempt and their positions the answer;
else another writer's, a conflict (docs/lost-replies.md).
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, LiteralString, TypeVar, cast

from eventsourcing.persistence import IntegrityError, InterfaceError, OperationalError, StoredEvent
from psycopg.sql import SQL, Composable, Identifier

from actae.adapters.persistence.awaiting import pause

if TYPE_CHECKING:
    from eventsourcing.postgres import PostgresDatastore

WRITE_ATTEMPTS = 10
"""Attempts of a write (and of a read) against connection errors, ``WRITE_RETRY_WAIT`` apart."""
WRITE_RETRY_WAIT = 0.2
TRANSIENT_ERRORS = (InterfaceError, OperationalError)
"""Errors after which an attempt is repeated: the connection, not the statement, failed."""

F = TypeVar("F", bound=Callable[..., Any])


def retried_on_connection_errors(function: F) -> F:
    """``function`` (a read), tried up to ``WRITE_ATTEMPTS`` times while the connection fails.

    A plain loop, not tenacity's decorator, which costs a tenth of a read on PostgreSQL.
    """

    @functools.wraps(function)
    def retried(*args: Any, **kwargs: Any) -> Any:
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            try:
                return function(*args, **kwargs)
            except TRANSIENT_ERRORS:
                if attempt == WRITE_ATTEMPTS:
                    raise
                pause(WRITE_RETRY_WAIT * (1 + 0.1 * (random.random() - 0.5)))  # noqa: S311
        raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover

    return cast(F, retried)


class RecognisesOwnCommits:
    """Recorder part that retries an unanswered write and recognises its own earlier commit."""

    if TYPE_CHECKING:  # provided by ActaePostgresRecorder
        datastore: PostgresDatastore
        _table: Composable

        def _execute(
            self, query: LiteralString, params: Sequence[Any]
        ) -> list[tuple[Any, ...]]: ...

    _own_rows: LiteralString | None = None

    def _insert_again(
        self, stored_events: Sequence[StoredEvent], statement: LiteralString, params: list[Any]
    ) -> list[int]:
        """Retry a write whose first attempt failed with the outcome unknown; its positions."""
        for attempt in range(2, WRITE_ATTEMPTS + 1):
            pause(WRITE_RETRY_WAIT * (1 + 0.1 * (random.random() - 0.5)))  # noqa: S311
            try:
                rows = self._execute(statement, params)
            except TRANSIENT_ERRORS:
                if attempt == WRITE_ATTEMPTS:
                    raise
                continue
            except IntegrityError:
                positions: list[int] | None = self.own_commit(stored_events)
                if positions is None:
                    raise
                return positions
            return [row[0] for row in rows]
        raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover

    @retried_on_connection_errors
    def own_commit(self, stored_events: Sequence[StoredEvent]) -> list[int] | None:
        """The positions of ``stored_events`` if the store holds exactly these rows, else None."""
        keys = [(e.originator_id, e.originator_version) for e in stored_events]
        rows = self._execute(
            self._own_rows_query(),
            [[originator for originator, _ in keys], [version for _, version in keys]],
        )
        found = {(row[1], row[2]): row for row in rows}
        positions = []
        for event, key in zip(stored_events, keys, strict=True):
            row = found.get(key)
            if row is None or row[3] != event.topic or bytes(row[4]) != bytes(event.state):
                return None
            positions.append(row[0])
        return sorted(positions)

    def _own_rows_query(self) -> LiteralString:
        """The rows at given (originator_id, originator_version) pairs, with positions."""
        if self._own_rows is None:
            self._own_rows = (
                SQL(
                    "SELECT t.notification_id, t.originator_id, t.originator_version,"
                    " t.topic, t.state FROM {table} t"
                    " JOIN unnest(%s::{id_type}[], %s::bigint[]) AS k(originator_id, version)"
                    " ON t.originator_id = k.originator_id"
                    " AND t.originator_version = k.version"
                )
                .format(table=self._table, id_type=Identifier(self.datastore.originator_id_type))
                .as_string()
            )
        return self._own_rows
