"""Contract: bad input raises ValidationError naming field and reason; nothing is written."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import pytest

import actae


def global_position(store: actae.Store) -> int | None:
    """The position of the newest stored event of any aggregate, to prove nothing was written."""
    position: int | None = store._service.recorder.max_notification_id()
    return position


class NotJson:
    pass


@pytest.fixture
def run(store: actae.Store) -> actae.RunInfo:
    return store.start_run("wf", agent_id="a", state={"n": 0}, operation_id="start:wf")


def bad_calls(store: actae.Store, run: actae.RunInfo) -> list[tuple[str, Callable[[], Any]]]:
    cid = run.channel_id
    ok: dict[str, Any] = {"kind": "k", "payload": {}, "expected_cursor": 1}
    trans: dict[str, Any] = {
        "kind": "k",
        "payload": {},
        "state": {},
        "expected_version": 1,
        "expected_cursor": 1,
    }
    return [
        ("channel_id", lambda: store.record("not-a-uuid", **ok)),
        ("channel_id", lambda: store.record(42, **ok)),  # type: ignore[arg-type]
        ("kind", lambda: store.record(cid, **{**ok, "kind": ""})),
        ("kind", lambda: store.record(cid, **{**ok, "kind": "x" * 10_000})),
        ("payload", lambda: store.record(cid, **{**ok, "payload": [1, 2]})),
        ("payload", lambda: store.record(cid, **{**ok, "payload": {"f": NotJson()}})),
        ("payload", lambda: store.record(cid, **{**ok, "payload": {"d": dt.datetime.now()}})),
        ("payload", lambda: store.record(cid, **{**ok, "payload": {1: "int key"}})),
        ("payload", lambda: store.record(cid, **{**ok, "payload": {"big": 2**70}})),
        ("payload", lambda: store.record(cid, **{**ok, "payload": {"x": [None, float("nan")]}})),
        ("state", lambda: store.transition(cid, **{**trans, "state": {"x": float("inf")}})),
        ("expected_cursor", lambda: store.record(cid, **{**ok, "expected_cursor": 0})),
        ("expected_cursor", lambda: store.record(cid, **{**ok, "expected_cursor": "1"})),
        ("expected_cursor", lambda: store.record(cid, **{**ok, "expected_cursor": True})),
        ("operation_id", lambda: store.record(cid, **ok, operation_id="")),
        ("state", lambda: store.transition(cid, **{**trans, "state": "text"})),
        ("state", lambda: store.transition(cid, **{**trans, "state": None})),
        ("state", lambda: store.transition(cid, **{**trans, "state": {"s": {1, 2}}})),
        ("expected_version", lambda: store.transition(cid, **{**trans, "expected_version": -1})),
        ("workflow_id", lambda: store.start_run("", agent_id="a", state={})),
        ("agent_id", lambda: store.start_run("wf", agent_id=None, state={})),  # type: ignore[arg-type]
        ("state", lambda: store.start_run("wf", agent_id="a", state=[])),  # type: ignore[arg-type]
        ("pins.colour", lambda: store.start_run("wf", agent_id="a", state={}, pins={"colour": 1})),
        (
            "pins.schema",
            lambda: store.start_run("wf", agent_id="a", state={}, pins={"schema": "1"}),
        ),
        ("pins.model", lambda: store.start_run("wf", agent_id="a", state={}, pins={"model": 3})),
        ("pins", lambda: store.start_run("wf", agent_id="a", state={}, pins=["m"])),  # type: ignore[arg-type]
        ("deadline", lambda: store.start_run("wf", agent_id="a", state={}, deadline="soon")),  # type: ignore[arg-type]
        ("parent_run_id", lambda: store.start_run("wf", agent_id="a", state={}, parent_run_id="x")),
        ("at", lambda: store.fork(cid, at=0)),
        ("reason", lambda: store.fork(cid, at=1, reason="r" * 5000)),
        ("pins.model", lambda: store.fork(cid, at=1, pins={"model": ""})),
        ("cursor", lambda: store.state_at(cid, cursor=0)),
        ("cursor", lambda: store.state_at(cid, cursor=-3)),
        ("after", lambda: store.events(cid, after=-1)),
        ("limit", lambda: store.events(cid, limit=0)),
        ("run_id", lambda: store.run("nope")),
        # with two bad fields, a run's keeping names its run id first
        ("run_id", lambda: store.forget("nope", actor="", reason="r")),
        ("run_id", lambda: store.hold("nope", actor="", reason="r")),
        ("run_id", lambda: store.release("nope", actor="", reason="r")),
    ]


def test_every_bad_input_names_its_field_and_writes_nothing(
    store: actae.Store, run: actae.RunInfo
) -> None:
    before = (global_position(store), store.events(run.channel_id))

    for field, call in bad_calls(store, run):
        with pytest.raises(actae.ValidationError) as caught:
            call()
        assert caught.value.field == field, (field, caught.value)
        assert caught.value.reason
        assert field in str(caught.value)

    assert (global_position(store), store.events(run.channel_id)) == before


def test_validation_comes_before_idempotency_lookup(store: actae.Store, run: actae.RunInfo) -> None:
    with pytest.raises(actae.ValidationError):
        store.start_run("wf", agent_id="a", state={"n": 0}, operation_id="start:wf", pins={"x": 1})


def test_oversized_documents_are_refused_by_default_limit() -> None:
    # The limit is checked before any I/O, so one backend proves it.
    with actae.open("memory://") as store:
        run = store.start_run("wf", agent_id="a", state={})
        too_big = {"blob": "x" * (128 * 1024 * 1024)}
        with pytest.raises(actae.ValidationError) as caught:
            store.record(run.channel_id, kind="k", payload=too_big, expected_cursor=1)
        assert caught.value.field == "payload"
        assert "limit" in caught.value.reason
        assert store.head(run.channel_id).cursor == 1


def test_configured_limit_applies_to_state(store_url: str) -> None:
    with actae.open(store_url, max_document_bytes=1024) as store:
        with pytest.raises(actae.ValidationError) as caught:
            store.start_run("wf", agent_id="a", state={"blob": "x" * 2000})
        assert caught.value.field == "state"
        assert global_position(store) in (None, 0)


def test_bad_store_urls_are_refused() -> None:
    for url, field in [
        ("mysql://x/y", "url"),
        ("sqlite://relative.db", "url"),
        ("postgresql://h/", "url"),
        ("postgresql://h/db?schema=Bad-Name", "url.schema"),
        ("postgresql://h/db?colour=blue", "url.colour"),
    ]:
        with pytest.raises(actae.ValidationError) as caught:
            actae.open(url)
        assert caught.value.field == field


def test_the_service_refuses_to_save_what_is_not_an_actae_aggregate(
    store: actae.Store, run: actae.RunInfo
) -> None:
    """``save`` writes aggregates' events directly, so anything else is refused, unwritten."""
    before = global_position(store)
    with pytest.raises(TypeError, match="not an Actae aggregate"):
        store._service.save(NotJson())
    assert global_position(store) == before
