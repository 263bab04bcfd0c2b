"""PostgreSQL recorder for the event store.

It is eventsourcing's recorder with one change: a write whose events are large (a big state
snapshot) is sent without libpq pipeline mode. In pipeline mode a single multi-megabyte
statement left the connection waiting forever (server in ``ClientRead``, client in
``Pipeline.sync``) on this stack (psycopg 3.3 binary, PostgreSQL 15); compare psycopg issue
#685. Small writes keep the pipeline, which saves round trips.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eventsourcing.persistence import InterfaceError, OperationalError, StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder
from eventsourcing.utils import retry

PIPELINE_LIMIT_BYTES = 256 * 1024


class ActaePostgresRecorder(PostgresApplicationRecorder):
    """Application recorder that avoids pipeline mode for large writes."""

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """Insert events in one transaction, as the stock recorder does."""
        if sum(len(event.state) for event in stored_events) < PIPELINE_LIMIT_BYTES:
            pipelined: Sequence[int] | None = super().insert_events(stored_events, **kwargs)
            return pipelined
        with (
            self.datastore.get_connection() as conn,
            conn.transaction(),
            conn.cursor() as curs,
        ):
            self._insert_events(curs, stored_events, **kwargs)
            self._insert_stored_events(curs, stored_events, **kwargs)
            ids: Sequence[int] | None = self._fetch_ids_after_insert_events(
                curs, stored_events, **kwargs
            )
            return ids
