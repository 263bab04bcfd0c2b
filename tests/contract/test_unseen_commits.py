"""start_run and fork find their own committed write when the store's answer was a refusal.

Without an ``operation_id`` they record themselves under one made up for the call, so when
a write committed but the call saw the store refuse it (the retry of a write whose reply
was lost, on a recorder that cannot tell its own rows), the next attempt finds the call's
operation record and replays it, instead of starting a second run or forking twice.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest

import actae


@pytest.fixture
def unseen_commit(store: actae.Store) -> Iterator[list[bool]]:
    """Append ``True`` to arm: the next write commits, then answers like its retry would
    on a recorder that cannot tell its own rows, with a duplicate refusal."""
    recorder: Any = store._service.recorder
    insert = recorder.insert_events
    armed: list[bool] = []

    def commit_then_refuse(events: Sequence[Any], **kwargs: Any) -> Any:
        if armed and armed[-1]:
            armed.append(False)
            insert(events, **kwargs)
        return insert(events, **kwargs)  # after the commit: the rows exist, IntegrityError

    recorder.insert_events = commit_then_refuse
    yield armed
    del recorder.insert_events


def run_ids(store: actae.Store) -> list[str]:
    projector = store.projector()
    projector.catch_up()
    return sorted(str(row["run_id"]) for row in projector.query("SELECT run_id FROM run_status"))


def test_a_start_whose_commit_went_unseen_starts_one_run(
    store: actae.Store, unseen_commit: list[bool]
) -> None:
    unseen_commit.append(True)
    info = store.start_run("wf", agent_id="a", state={"n": 0})

    assert unseen_commit == [True, False]  # the fault fired
    assert run_ids(store) == [str(info.run_id)]
    assert store.record(info.channel_id, kind="next", payload={}, expected_cursor=1).cursor == 2


def test_a_fork_whose_commit_went_unseen_makes_one_child(
    store: actae.Store, unseen_commit: list[bool]
) -> None:
    parent = store.start_run("wf", agent_id="a", state={"n": 0})
    unseen_commit.append(True)
    receipt = store.fork(parent.channel_id, at=1)

    assert unseen_commit == [True, False]
    children = [r.child_run_id for r in store.lineage(parent.run_id).descendants]
    assert children == [receipt.child_run_id]
    assert run_ids(store) == sorted([str(parent.run_id), str(receipt.child_run_id)])
