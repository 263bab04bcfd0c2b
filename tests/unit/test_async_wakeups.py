"""An AsyncStore's subscribers are woken by its commits on every event loop it serves in turn."""

from __future__ import annotations

import asyncio

import actae

WAKE = 5.0
"""How soon a woken subscriber must deliver; its own poll interval is far longer."""


async def _delivered_after_a_commit(store: actae.AsyncStore, channel_id: object) -> int:
    head = await store.head(channel_id)  # type: ignore[arg-type]
    async with store.subscribe(channel_id, after=head.cursor, poll_interval=600) as live:  # type: ignore[arg-type]
        pending = asyncio.ensure_future(live.__anext__())
        loop = asyncio.get_running_loop()
        for _ in range(500):  # until the subscriber waits on this loop (a condition, bounded)
            if store._signal is not None and loop in store._signal._waiting:
                break
            await asyncio.sleep(0.01)
        await store.record(channel_id, kind="note", payload={}, expected_cursor=head.cursor)  # type: ignore[arg-type]
        event = await asyncio.wait_for(pending, WAKE)
        return event.cursor


def test_a_second_event_loop_is_woken_too() -> None:
    store = actae.AsyncStore(actae.open("memory://"))
    channel_id = store.sync.start_run("loops", agent_id="a", state={}).channel_id
    try:
        first = asyncio.run(_delivered_after_a_commit(store, channel_id))
        second = asyncio.run(_delivered_after_a_commit(store, channel_id))
        assert second == first + 1
    finally:
        asyncio.run(store.aclose())
