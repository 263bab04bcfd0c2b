"""Channel aggregate: given events / when command / then events."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

import actae
from actae.domain.channel import Channel, ChannelHead, HeadCache, carried
from actae.domain.errors import ConflictError
from actae.domain.ledger import effect_note, opening_head, reread_head
from actae.domain.run import Run

AT = datetime(2026, 1, 1, tzinfo=UTC)


def opened(run_id: uuid.UUID | None = None) -> Channel:
    """A channel opened at cursor 1: a run's main channel if ``run_id`` is given."""
    channel_id = uuid.uuid4() if run_id is None else Run.channel_for(run_id)
    return Channel.open(
        channel_id=channel_id,
        run_id=run_id or uuid.uuid4(),
        kind="run.started",
        payload={},
        state={"step": 0},
        state_checksum="sha256:x",
        operation_id=None,
        at=AT,
    )


def test_open_creates_state_version_one_at_cursor_one() -> None:
    channel = opened()

    (event,) = channel.collect_events()

    assert isinstance(event, Channel.Opened)
    assert (event.originator_version, event.state_version, event.state_cursor) == (1, 1, 1)


def test_record_keeps_the_version_and_points_at_where_it_was_created() -> None:
    channel = opened()
    channel.collect_events()

    channel.record(kind="llm", payload={"t": 1}, operation_id="op", at=AT)

    (event,) = channel.collect_events()
    assert isinstance(event, Channel.Recorded)
    assert (event.originator_version, event.state_version, event.state_cursor) == (2, 1, 1)


def test_transition_pins_the_next_version_to_its_own_cursor() -> None:
    channel = opened()
    channel.record(kind="llm", payload={}, operation_id=None, at=AT)
    channel.collect_events()

    channel.transition(
        kind="step",
        payload={},
        state={"step": 1},
        state_checksum="sha256:y",
        operation_id=None,
        at=AT,
    )

    (event,) = channel.collect_events()
    assert isinstance(event, Channel.Transitioned)
    assert (event.originator_version, event.state_version, event.state_cursor) == (3, 2, 3)


def test_head_event_alone_rebuilds_the_channel() -> None:
    channel = opened()
    channel.transition(
        kind="s", payload={}, state={}, state_checksum="sha256:y", operation_id=None, at=AT
    )
    channel.record(kind="llm", payload={}, operation_id=None, at=AT)
    head = channel.collect_events()[-1]
    assert isinstance(head, Channel.Event)

    rebuilt = Channel.from_head(head)

    assert (rebuilt.id, rebuilt.cursor, rebuilt.state_version, rebuilt.state_cursor) == (
        channel.id,
        3,
        2,
        2,
    )
    assert rebuilt.run_id == channel.run_id


@pytest.mark.parametrize(("version", "cursor"), [(1, 2), (2, 1), (0, 1)])
def test_ensure_at_refuses_any_stale_expectation(version: int, cursor: int) -> None:
    channel = opened()
    channel.transition(
        kind="s", payload={}, state={}, state_checksum="sha256:y", operation_id=None, at=AT
    )

    with pytest.raises(ConflictError) as caught:
        channel.ensure_at(expected_version=version, expected_cursor=cursor)

    assert (caught.value.actual_version, caught.value.actual_cursor) == (2, 2)
    channel.ensure_at(expected_version=2, expected_cursor=2)
    channel.ensure_at(expected_version=None, expected_cursor=2)


def opened_channel() -> Channel:
    return Channel.open(
        channel_id=uuid.uuid4(),
        run_id=uuid.uuid4(),
        kind="run.started",
        payload={"big": "x" * 10_000},
        state={"big": "y" * 10_000},
        state_checksum="c",
        operation_id=None,
        at=datetime.now(UTC),
    )


def test_remembered_heads_keep_the_head_fields_but_not_the_body() -> None:
    channel = opened_channel()
    channel.transition(
        kind="step",
        payload={"p": 1},
        state={"s": "z" * 10_000},
        state_checksum="d",
        operation_id=None,
        at=datetime.now(UTC),
    )
    heads = HeadCache(maxsize=2)
    for event in channel.collect_events():
        heads.put(event)  # type: ignore[arg-type]
    remembered = heads.get(channel.id)
    assert remembered is not None
    rebuilt = Channel.from_head(remembered)
    assert (rebuilt.cursor, rebuilt.state_version, rebuilt.state_cursor) == (2, 2, 2)
    assert rebuilt.run_id == channel.run_id
    assert isinstance(remembered, ChannelHead)  # no payload, no state
    assert not hasattr(remembered, "payload")
    assert not hasattr(remembered, "state")
    assert heads.main_channel(channel.run_id) == channel.id


def test_remembered_heads_are_bounded_and_never_go_back() -> None:
    channels = [opened_channel() for _ in range(3)]
    first_events = {c.id: c.collect_events()[0] for c in channels}
    heads = HeadCache(maxsize=2)
    for event in first_events.values():
        heads.put(event)  # type: ignore[arg-type]
    assert len(heads) == 2
    assert heads.get(channels[0].id) is None  # the oldest-entered was forgotten
    newest = channels[2]
    newest.record(kind="k", payload={}, operation_id=None, at=datetime.now(UTC))
    (later,) = newest.collect_events()
    heads.put(later)  # type: ignore[arg-type]
    heads.put(first_events[newest.id])  # type: ignore[arg-type]  # an older event arrives late
    remembered = heads.get(newest.id)
    assert remembered is not None
    assert remembered.originator_version == 2


def test_a_reread_head_is_remembered() -> None:
    """The head is read from the store once and remembered as this process's guess."""
    with actae.open("memory://") as store:
        run = store.start_run("wf", agent_id="a", state={})
        shell = store._service
        shell.forget_guesses([run.channel_id])
        assert shell.core.heads.get(run.channel_id) is None

        head = reread_head(shell, run.channel_id)

        assert (head.originator_version, head.state_version) == (1, 1)
        remembered = shell.core.heads.get(run.channel_id)
        assert remembered is not None
        assert remembered.originator_version == 1


def test_a_forgotten_head_is_read_again() -> None:
    channel = opened_channel()
    (opened,) = channel.collect_events()
    heads = HeadCache()
    heads.put(opened)  # type: ignore[arg-type]

    heads.forget(channel.id)

    assert heads.get(channel.id) is None


heads = st.builds(
    ChannelHead,
    originator_id=st.uuids(),
    originator_version=st.integers(1, 10**6),
    timestamp=st.just(AT),
    run_id=st.uuids(),
    state_version=st.integers(1, 10**6),
    state_cursor=st.integers(1, 10**6),
    open_effects=st.lists(st.text(max_size=5), max_size=3).map(tuple),
    usage=st.dictionaries(st.sampled_from(["tokens", "cost"]), st.floats(0, 1e6)),
)
documents = st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=3)
operation_ids = st.none() | st.text(min_size=1, max_size=10)


@given(heads, st.text(min_size=1, max_size=8), documents, documents, operation_ids)
def test_a_transition_built_on_a_head_is_the_event_the_aggregate_triggers(
    head: ChannelHead,
    kind: str,
    payload: dict[str, object],
    state: dict[str, object],
    operation_id: str | None,
) -> None:
    """The command path builds events on the head alone; they must be the aggregate's."""
    fields = {"kind": kind, "payload": payload, "operation_id": operation_id}
    channel = Channel.from_head(head)
    channel.transition(**fields, state=state, state_checksum="sha256:s", at=AT)  # type: ignore[arg-type]
    (triggered,) = channel.collect_events()
    direct = Channel.transitioned(head, **fields, state=state, state_checksum="sha256:s", at=AT)  # type: ignore[arg-type]
    assert direct == triggered
    assert type(direct) is type(triggered)


@given(
    heads,
    st.text(min_size=1, max_size=8),
    documents,
    operation_ids,
    st.none() | st.dictionaries(st.sampled_from(["tokens", "cost"]), st.floats(0, 1e3)),
)
def test_a_record_built_on_a_head_is_the_event_the_aggregate_triggers(
    head: ChannelHead,
    kind: str,
    payload: dict[str, object],
    operation_id: str | None,
    usage: dict[str, float] | None,
) -> None:
    fields = {"kind": kind, "payload": payload, "operation_id": operation_id, "usage": usage}
    channel = Channel.from_head(head)
    channel.record(**fields, at=AT)  # type: ignore[arg-type]
    (triggered,) = channel.collect_events()
    direct = Channel.recorded(head, **fields, at=AT)  # type: ignore[arg-type]
    assert direct == triggered
    assert type(direct) is type(triggered)


@given(heads, st.data(), st.booleans(), st.text(min_size=1, max_size=8), documents)
def test_an_effect_note_built_on_a_head_is_the_event_the_aggregate_triggers(
    head: ChannelHead, data: st.DataObject, settled: bool, kind: str, payload: dict[str, object]
) -> None:
    """The ledger notes an effect's outcome on the head alone; it must be the aggregate's.

    A settled effect leaves the head's open effects; any other outcome keeps it open, last.
    """
    key = data.draw(st.sampled_from([*head.open_effects, "another-effect"]))
    still_open = [other for other in head.open_effects if other != key]
    if not settled:
        still_open.append(key)
    channel = Channel.from_head(head)
    fields = {**carried(channel), "open_effects": tuple(still_open)}
    channel.trigger_event(
        Channel.Recorded, timestamp=AT, kind=kind, payload=payload, operation_id=None, **fields
    )
    (triggered,) = channel.collect_events()
    direct = effect_note(head, key, (kind, payload, settled), AT)
    assert direct == triggered
    assert type(direct) is type(triggered)


@given(heads)
def test_an_event_built_on_a_head_refuses_a_name_that_is_no_field(head: ChannelHead) -> None:
    """Built without validation, a misspelled field would otherwise vanish into a default."""
    with pytest.raises(TypeError, match="no field opration_id"):
        Channel.following(head, Channel.Recorded, AT, kind="k", payload={}, opration_id="op")


def test_a_main_channel_opens_at_the_head_a_claim_guesses_for_a_run_it_has_not_seen() -> None:
    """The claim's guess (``opening_head``) is exactly the head ``Channel.open`` makes."""
    run_id = uuid.uuid4()
    (event,) = opened(run_id).pending_events
    assert isinstance(event, Channel.Opened)
    assert ChannelHead.of(event) == opening_head(run_id, AT)
