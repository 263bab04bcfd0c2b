"""The LangGraph savers refuse a checkpoint or a pending write whose stored body changed.

Issue 28, item 4, on the savers' read paths: every body carries a checksum, so a flipped
byte in the row of a checkpoint (a transition) or of a pending write (a record) raises
``CorruptionError`` naming the thread's channel and the row's cursor.
"""

from __future__ import annotations

import pytest

import actae
from actae.langgraph import ActaeSaver
from tests.contract.rows import flip
from tests.langgraph.test_saver import checkpoint, config, metadata


@pytest.mark.parametrize(
    ("topic", "marker"),
    [("Channel.Transitioned", b'"r-5511'), ("Channel.Recorded", b'"~pay')],
    ids=["checkpoint", "pending-write"],
)
def test_a_flipped_byte_in_a_saved_row_is_refused_by_the_saver(
    store: actae.Store, store_url: str, topic: str, marker: bytes
) -> None:
    saver = ActaeSaver(store)
    first = saver.put(config("t1"), checkpoint(topic="refund"), metadata(0, run_id="r-5511"), {})
    saver.put_writes(first, [("amount", 130)], task_id="task-1", task_path="~pay")
    run = saver.thread_run("t1")
    assert run is not None
    row = flip(store, store_url, topic, marker)

    where = f"channel {run.channel_id} at cursor {row.version}"
    for read in (lambda: saver.get_tuple(config("t1")), lambda: list(saver.list(config("t1")))):
        with pytest.raises(actae.CorruptionError, match=where):
            read()
