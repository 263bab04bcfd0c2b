"""A pooled session that refused a write as read-only is closed, not lent again.

After a failback from a standby, sessions still connected where writes are refused stay so:
only a process that connects anew can write again. These tests make the store's own pooled
sessions read-only (nothing else on the shared server is touched) and check that a write
refused on one is followed by a write on a new session.
"""

from __future__ import annotations

from typing import Any

import pytest
from eventsourcing.persistence import PersistenceError

import actae

pytestmark = pytest.mark.postgres


def sessions(store: actae.Store) -> list[Any]:
    """The store's pooled connections at rest: the one its recorder keeps, and the idle."""
    recorder: Any = store._service.recorder
    kept = [recorder.kept._kept] if recorder.kept._kept is not None else []
    return [*kept, *recorder.datastore.pool._pool]


def test_a_session_that_refused_a_write_as_read_only_is_not_used_again(pg_url: str) -> None:
    with actae.open(pg_url) as store:
        store.start_run("before", agent_id="a", state={})
        read_only = sessions(store)
        for conn in read_only:  # as sessions still connected to a standby after the failback
            conn.execute("SET SESSION default_transaction_read_only = on")
        refused = 0
        for _ in range(len(read_only) + 1):
            try:
                run = store.start_run("after", agent_id="a", state={}, operation_id="after")
                break
            except PersistenceError:  # SQLSTATE 25006, which the store rides out as an outage
                refused += 1
        assert 0 < refused <= len(read_only), "a read-only session was lent again"
        assert store.run(run.run_id).status is actae.RunStatus.RUNNING
