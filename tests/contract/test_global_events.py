"""Contract: ``store.events(None, ...)`` pages through every channel in the global order."""

from __future__ import annotations

import pytest

import actae


def test_events_of_all_channels_come_in_global_order_page_by_page(store: actae.Store) -> None:
    first = store.start_run("a", agent_id="x", state={})
    second = store.start_run("b", agent_id="x", state={})
    store.record(first.channel_id, kind="note", payload={"n": 1}, expected_cursor=1)
    store.record(second.channel_id, kind="note", payload={"n": 2}, expected_cursor=1)

    pages, position = [], 0
    while page := store.events(None, after=position, limit=3):
        pages.append(page)
        position = page[-1].position or 0

    events = [event for page in pages for event in page]
    assert [len(page) for page in pages] == [3, 1]
    assert [(e.channel_id, e.cursor) for e in events] == [
        (first.channel_id, 1),
        (second.channel_id, 1),
        (first.channel_id, 2),
        (second.channel_id, 2),
    ]
    positions = [e.position or 0 for e in events]
    assert positions == sorted(positions)
    assert positions[-1] <= store.position()


def test_a_negative_position_is_refused(store: actae.Store) -> None:
    with pytest.raises(actae.ValidationError) as refused:
        store.events(None, after=-1)
    assert refused.value.field == "after"
