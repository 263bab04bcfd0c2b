"""After a connection error, a refused write counts as the caller's own only if it is.

The recorder re-sends a write whose outcome a connection error left unknown. When the store
then refuses it as a duplicate, the rows found must equal what the call sent, byte for byte;
rows another writer committed in between are a conflict, never a success.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from eventsourcing.persistence import OperationalError

import actae

pytestmark = pytest.mark.postgres


def test_a_rivals_rows_after_a_connection_error_are_a_conflict(pg_url: str) -> None:
    with actae.open(pg_url) as store, actae.open(pg_url) as rival:
        run = store.start_run("wf", agent_id="a", state={})
        rival.record(run.channel_id, kind="rival", payload={"who": "rival"}, expected_cursor=1)
        recorder: Any = store._service.recorder
        write = recorder._on_libpq  # the write's first attempt; retries go through psycopg
        failed: list[int] = []

        def lose_the_first_write(count: int, values: Sequence[Any]) -> Any:
            if not failed:
                failed.append(count)
                raise OperationalError("connection lost before the write was sent")
            return write(count, values)

        recorder._on_libpq = lose_the_first_write
        with pytest.raises(actae.ConflictError):
            store.record(run.channel_id, kind="mine", payload={"who": "me"}, expected_cursor=1)

        assert failed, "the fault did not fire"
        assert [e.kind for e in store.events(run.channel_id)] == ["run.started", "rival"]
