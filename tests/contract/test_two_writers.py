"""Contract: two stores on one database, each with its own remembered channel heads.

A command trusts the head its process last saw instead of reading it (``HeadCache`` in
``domain/channel.py``). These tests make that memory stale on purpose, by writing through a
second store (another process, as far as the first can tell), and check that no answer
changes: a stale head costs a re-read, never a wrong result.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import actae

SHARED_BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=SHARED_BACKENDS)
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """One database on each backend that two stores can share."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'shared.db'}"
    url: str = request.getfixturevalue("pg_url")
    return url


@pytest.fixture
def two_stores(shared_url: str) -> Iterator[tuple[actae.Store, actae.Store]]:
    with actae.open(shared_url) as first, actae.open(shared_url) as second:
        yield first, second


def step(
    store: actae.Store,
    channel_id: object,
    head: actae.Receipt | actae.RunInfo,
    n: int,
    **extra: object,
) -> actae.Receipt:
    return store.transition(
        channel_id,  # type: ignore[arg-type]
        kind="step",
        payload={"n": n},
        state={"n": n},
        expected_version=head.state_version,
        expected_cursor=head.cursor,
        **extra,  # type: ignore[arg-type]
    )


def test_a_stale_memory_does_not_refuse_a_caller_who_saw_the_true_head(
    two_stores: tuple[actae.Store, actae.Store],
) -> None:
    a, b = two_stores
    run = a.start_run("w", agent_id="x", state={"n": 0})
    mine = step(a, run.channel_id, run, 1)  # a remembers cursor 2
    theirs = step(b, run.channel_id, mine, 2)  # the channel moves to 3 behind a's back
    after = step(a, run.channel_id, theirs, 3)
    assert (after.cursor, after.state_version) == (4, 4)
    assert [e.cursor for e in a.events(run.channel_id)] == [1, 2, 3, 4]


def test_a_stale_memory_and_a_stale_caller_get_the_true_conflict(
    two_stores: tuple[actae.Store, actae.Store],
) -> None:
    a, b = two_stores
    run = a.start_run("w", agent_id="x", state={"n": 0})
    mine = step(a, run.channel_id, run, 1)
    step(b, run.channel_id, mine, 2)
    with pytest.raises(actae.ConflictError) as caught:
        step(a, run.channel_id, mine, 3)  # a and its caller both believe cursor 2
    assert (caught.value.actual_cursor, caught.value.actual_version) == (3, 3)
    assert a.head(run.channel_id).cursor == 3  # nothing was written


def test_a_repeat_of_an_operation_the_other_store_ran_is_a_replay(
    two_stores: tuple[actae.Store, actae.Store],
) -> None:
    a, b = two_stores
    run = a.start_run("w", agent_id="x", state={"n": 0})
    first = step(a, run.channel_id, run, 1)  # a remembers cursor 2
    original = step(b, run.channel_id, first, 2, operation_id="op-2")
    replay = step(a, run.channel_id, first, 2, operation_id="op-2")
    assert replay.replayed
    assert (replay.cursor, replay.state_version) == (original.cursor, original.state_version)
    with pytest.raises(actae.OperationConflictError):
        step(a, run.channel_id, original, 99, operation_id="op-2")
    assert a.head(run.channel_id).cursor == 3


def test_a_claim_notes_the_effect_at_the_true_head(
    two_stores: tuple[actae.Store, actae.Store],
) -> None:
    a, b = two_stores
    run = a.start_run("w", agent_id="x", state={"n": 0})
    mine = step(a, run.channel_id, run, 1)
    step(b, run.channel_id, mine, 2)  # a still remembers cursor 2
    claim = a.claim("charge", run_id=run.run_id, worker="w1", lease=30.0, request={"n": 1})
    assert claim.status == "granted"
    events = a.events(run.channel_id)
    assert [e.cursor for e in events] == [1, 2, 3, 4]
    assert events[-1].kind == "effect.claimed"
    assert [e.effect_key for e in a.recover(run.channel_id).outstanding] == ["charge"]


def test_a_claim_on_a_run_this_store_has_not_seen_notes_at_the_true_head(
    two_stores: tuple[actae.Store, actae.Store],
) -> None:
    """b guesses the run's opening head; once the channel moved on, the write refutes it."""
    a, b = two_stores
    fresh = a.start_run("w", agent_id="x", state={"n": 0})
    moved = a.start_run("w", agent_id="x", state={"n": 0})
    step(a, moved.channel_id, moved, 1)
    for key, run, cursors in (("fresh", fresh, [1, 2]), ("moved", moved, [1, 2, 3])):
        claim = b.claim(key, run_id=run.run_id, worker="w1", lease=30.0, request={"n": 1})
        assert claim.status == "granted"
        events = a.events(run.channel_id)
        assert [e.cursor for e in events] == cursors
        assert (events[-1].kind, events[-1].state_version) == ("effect.claimed", len(cursors) - 1)
        assert [e.effect_key for e in a.recover(run.channel_id).outstanding] == [key]
    with pytest.raises(actae.NotFoundError):
        b.claim("k", run_id="00000000-0000-4000-8000-000000000000", worker="w", lease=1.0)


def test_a_first_claim_of_a_key_the_other_store_holds_is_refused(
    two_stores: tuple[actae.Store, actae.Store],
) -> None:
    a, b = two_stores
    run = a.start_run("w", agent_id="x", state={"n": 0})
    held = b.claim("charge", run_id=run.run_id, worker="w2", lease=30.0, request={"n": 1})
    with pytest.raises(actae.LeaseHeldError):
        a.claim("charge", run_id=run.run_id, worker="w1", lease=30.0, request={"n": 1})
    assert a.effect("charge").token == held.token
    with pytest.raises(actae.OperationConflictError):
        a.claim("charge", run_id=run.run_id, worker="w1", lease=30.0, request={"n": 2})


# -- effects this process holds (domain/known_effects.py) ---------------------------------


@pytest.fixture
def two_clocked(
    shared_url: str,
) -> Iterator[tuple[actae.Store, actae.Store, actae.ManualClock]]:
    """Two stores on one database and one manual clock, so a lease can run out."""
    clock = actae.ManualClock()
    with actae.open(shared_url, clock=clock) as a, actae.open(shared_url, clock=clock) as b:
        yield a, b, clock


LEASE = 30.0


def test_a_remembered_claim_taken_over_elsewhere_is_fenced(
    two_clocked: tuple[actae.Store, actae.Store, actae.ManualClock],
) -> None:
    """a remembers its claim (token 1); b takes the effect over once the lease ran out."""
    a, b, clock = two_clocked
    run = a.start_run("w", agent_id="x", state={})
    a.claim("charge", run_id=run.run_id, worker="w1", lease=LEASE, request={"n": 1})
    clock.advance(LEASE + 1)
    taken = b.claim("charge", run_id=run.run_id, worker="w2", lease=LEASE, request={"n": 1})
    before = a.effect("charge")

    calls: list[Callable[[], object]] = [
        lambda: a.complete_effect("charge", token=1, worker="w1", result={"late": True}),
        lambda: a.fail_effect("charge", token=1, worker="w1", error="late"),
        lambda: a.heartbeat("charge", token=1, worker="w1", lease=LEASE),
    ]
    for call in calls:
        with pytest.raises(actae.FencingError):
            call()
    assert a.effect("charge") == before
    done = b.complete_effect("charge", token=taken.token, worker="w2", result={"ok": True})
    assert done.status is actae.EffectStatus.COMPLETED


@pytest.fixture
def skewed(shared_url: str) -> Iterator[tuple[actae.Store, actae.Store, actae.ManualClock]]:
    """Two stores on one database whose clocks differ (b's moves, a's does not)."""
    mine, theirs = actae.ManualClock(), actae.ManualClock()
    with actae.open(shared_url, clock=mine) as a, actae.open(shared_url, clock=theirs) as b:
        yield a, b, theirs


def test_a_remembered_claim_does_not_refuse_the_true_holder(
    skewed: tuple[actae.Store, actae.Store, actae.ManualClock],
) -> None:
    """a's memory says token 1, its lease still live by a's clock; by b's clock it ran out
    and the caller holds token 2 from b: the store decides, not a's memory."""
    a, b, their_clock = skewed
    run = a.start_run("w", agent_id="x", state={})
    a.claim("charge", run_id=run.run_id, worker="w1", lease=LEASE, request={"n": 1})
    their_clock.advance(LEASE + 1)
    taken = b.claim("charge", run_id=run.run_id, worker="w2", lease=LEASE, request={"n": 1})

    renewed = a.heartbeat("charge", token=taken.token, worker="w2", lease=LEASE)
    assert renewed.token == taken.token
    with pytest.raises(actae.FencingError):  # a's renewal did not revive its old memory
        a.complete_effect("charge", token=1, worker="w1", result={"late": True})
    done = a.complete_effect("charge", token=taken.token, worker="w2", result={"ok": True})
    assert (done.status, done.result) == (actae.EffectStatus.COMPLETED, {"ok": True})
    again = a.complete_effect("charge", token=taken.token, worker="w2", result={"ok": True})
    assert again.status is actae.EffectStatus.COMPLETED  # a lost reply's repeat


def test_a_completion_repeated_after_another_store_recorded_it_gets_the_recorded_answer(
    two_clocked: tuple[actae.Store, actae.Store, actae.ManualClock],
) -> None:
    """a remembers its claim; the completion went through b and its reply was lost."""
    a, b, _ = two_clocked
    run = a.start_run("w", agent_id="x", state={})
    claim = a.claim("charge", run_id=run.run_id, worker="w1", lease=LEASE, request={})
    b.complete_effect("charge", token=claim.token, worker="w1", result={"charge_id": "ch_1"})

    again = a.complete_effect(
        "charge", token=claim.token, worker="w1", result={"charge_id": "ch_1"}
    )
    assert (again.status, again.result) == (actae.EffectStatus.COMPLETED, {"charge_id": "ch_1"})
    with pytest.raises(actae.OperationConflictError):
        a.complete_effect("charge", token=claim.token, worker="w1", result={"charge_id": "ch_2"})
    assert [e.kind for e in a.events(run.channel_id)].count("effect.completed") == 1


@pytest.mark.parametrize("purged_by", ["this store", "the other store"])
def test_a_remembered_effect_of_a_purged_run_is_not_written_again(
    two_clocked: tuple[actae.Store, actae.Store, actae.ManualClock], purged_by: str
) -> None:
    """A purge deletes the effect's events: a write built on memory would collide with
    nothing. This store forgets what it purged; a memory of the other store's purge is
    not trusted once its lease has run out (retention only purges runs ended long ago)."""
    a, b, clock = two_clocked
    purger = a if purged_by == "this store" else b
    lease = 4 * 3600.0 if purger is a else LEASE
    run = a.start_run("w", agent_id="x", state={})
    claim = a.claim("charge", run_id=run.run_id, worker="w1", lease=lease, request={})
    purger.set_retention({"cancelled": "1h"}, actor="ops")
    purger.cancel(run.run_id, actor="ops", reason="stopped")
    clock.advance(2 * 3600)
    assert purger.apply_retention(actor="ops").purged == [run.run_id]

    with pytest.raises(actae.NotFoundError):
        a.complete_effect("charge", token=claim.token, worker="w1", result={"late": True})
    with pytest.raises(actae.NotFoundError):
        a.effect("charge")


@pytest.mark.parametrize("purged_by", ["this store", "the other store"])
def test_a_remembered_effect_of_a_purged_run_is_not_written_over_its_key_used_again(
    two_clocked: tuple[actae.Store, actae.Store, actae.ManualClock], purged_by: str
) -> None:
    """Once a purged effect's key is claimed again, a heartbeat built on the memory of the
    old claim (it notes nothing on the purged run's channel) would find its predecessor and
    extend another worker's lease: the store must be asked."""
    a, b, clock = two_clocked
    purger = a if purged_by == "this store" else b
    lease = 4 * 3600.0 if purger is a else LEASE  # the remembered lease live, or run out
    run = a.start_run("w", agent_id="x", state={})
    claim = a.claim(
        "charge", run_id=run.run_id, worker="w1", lease=lease, timeout=4 * 3600.0, request={}
    )
    purger.set_retention({"cancelled": "1h"}, actor="ops")
    purger.cancel(run.run_id, actor="ops", reason="stopped")
    clock.advance(2 * 3600)
    assert purger.apply_retention(actor="ops").purged == [run.run_id]
    again = b.start_run("w", agent_id="y", state={})
    theirs = b.claim("charge", run_id=again.run_id, worker="w2", lease=LEASE, request={})

    with pytest.raises(actae.NotHolderError):
        a.heartbeat("charge", token=claim.token, worker="w1", lease=lease)
    effect = b.effect("charge")
    assert (effect.holder, effect.expires_at) == ("w2", theirs.expires_at)
