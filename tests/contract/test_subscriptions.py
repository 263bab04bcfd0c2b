"""Contract: replay-to-live subscriptions, per channel and global (every backend)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from uuid import UUID

import pytest

import actae

TIMEOUT = 30


def collect(
    sub: actae.Subscription, until: Callable[[list[actae.ChannelEvent]], bool]
) -> tuple[threading.Thread, list[actae.ChannelEvent]]:
    """Consume ``sub`` in a thread until ``until(seen)`` holds."""
    seen: list[actae.ChannelEvent] = []

    def consume() -> None:
        for event in sub:
            seen.append(event)
            if until(seen):
                return

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    return thread, seen


def append(store: actae.Store, channel_id: UUID, count: int) -> None:
    for n in range(count):
        head = store.head(channel_id)
        store.record(channel_id, kind="k", payload={"n": n}, expected_cursor=head.cursor)


def test_channel_subscription_replays_history_then_follows_live(store: actae.Store) -> None:
    run = store.start_run("wf", agent_id="a", state={})
    append(store, run.channel_id, 4)  # cursors 2..5

    with store.subscribe(run.channel_id, after=2) as sub:
        thread, seen = collect(sub, lambda s: s[-1].cursor == 9)
        append(store, run.channel_id, 4)  # cursors 6..9, written while it listens
        thread.join(TIMEOUT)

    assert [e.cursor for e in seen] == [3, 4, 5, 6, 7, 8, 9]
    assert seen == store.events(run.channel_id, after=2)
    assert sub.position == 9


def test_global_subscription_sees_every_channel_in_one_order(store: actae.Store) -> None:
    runs = [store.start_run(f"wf-{i}", agent_id="a", state={}) for i in range(3)]
    for run in runs:
        append(store, run.channel_id, 2)
    expected = {(e.channel_id, e.cursor) for r in runs for e in store.events(r.channel_id)}

    with store.subscribe() as sub:
        thread, seen = collect(sub, lambda s: len(s) == len(expected) + 3)
        for run in runs:
            append(store, run.channel_id, 1)
        thread.join(TIMEOUT)

    positions = [e.position or 0 for e in seen]
    assert positions == sorted(positions)
    assert len(set(positions)) == len(positions)
    assert {(e.channel_id, e.cursor) for e in seen} == expected | {(r.channel_id, 4) for r in runs}
    for run in runs:
        mine = [e.cursor for e in seen if e.channel_id == run.channel_id]
        assert mine == [1, 2, 3, 4]


def test_a_new_subscription_continues_exactly_where_the_last_stopped(
    store: actae.Store,
) -> None:
    runs = [store.start_run(f"wf-{i}", agent_id="a", state={}) for i in range(4)]
    with store.subscribe() as first:
        head = [next(first), next(first)]
    with store.subscribe(after=first.position) as second:
        thread, rest = collect(second, lambda s: len(s) == 2)
        thread.join(TIMEOUT)

    assert [e.channel_id for e in head + rest] == [r.channel_id for r in runs]


def test_a_slow_subscriber_does_not_hold_writers_back(store: actae.Store) -> None:
    run = store.start_run("wf", agent_id="a", state={})
    with store.subscribe(run.channel_id) as sub:
        first = next(sub)
        append(store, run.channel_id, 50)  # the subscriber reads nothing meanwhile
        rest = [next(sub) for _ in range(50)]

    assert [first.cursor] + [e.cursor for e in rest] == list(range(1, 52))


def test_stop_ends_a_waiting_iteration(store: actae.Store) -> None:
    run = store.start_run("wf", agent_id="a", state={})
    sub = store.subscribe(run.channel_id, after=1)
    thread, seen = collect(sub, lambda s: False)

    sub.close()
    thread.join(TIMEOUT)

    assert not thread.is_alive()
    assert seen == []


def test_bad_subscriptions_are_refused(store: actae.Store) -> None:
    run = store.start_run("wf", agent_id="a", state={})
    with pytest.raises(actae.NotFoundError):
        store.subscribe(run.channel_id, after=5)
    with pytest.raises(actae.NotFoundError):
        store.subscribe("00000000-0000-4000-8000-000000000000")
    with pytest.raises(actae.ValidationError):
        store.subscribe(run.channel_id, after=-1)
