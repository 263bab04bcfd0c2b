"""A run's event stream: history, then live events and status changes, until the client goes.

The stream is read in a thread that hands each server-sent event to the test through a
queue, so every wait has a deadline (``harness.stream``).
"""

from __future__ import annotations

import json
import threading
from typing import Any

import psycopg
import pytest

from actae.adapters.operate import views
from tests.console.harness import DEADLINE, OPERATOR, VIEWER, Console, stream, take
from tests.helpers import wait_for


def test_a_stream_sends_history_then_live_events_and_status(console: Console) -> None:
    run = console.scenario.running()
    store = console.store
    with stream(console, f"/api/runs/{run.run_id}/stream?after=0") as arrived:
        kind, status, _ = arrived.get(timeout=DEADLINE)
        assert (kind, status["run_id"], status["status"]) == ("status", str(run.run_id), "running")
        _, first, first_id = take(arrived, "event")
        assert (first["cursor"], first["kind"], first_id) == (1, "run.started", "1")

        store.record(run.channel_id, kind="model.call", payload={"tokens": 9}, expected_cursor=1)
        _, live, live_id = take(arrived, "event")
        assert (live["cursor"], live["kind"], live["payload"], live_id) == (
            2,
            "model.call",
            {"tokens": 9},
            "2",
        )
        _, moved, _ = take(arrived, "status")
        assert moved["head_cursor"] == 2

        store.pause(run.run_id, actor="dana", reason="hold")
        _, note, _ = take(arrived, "event")
        assert note["kind"] == "run.paused"
        _, paused, _ = take(arrived, "status")
        assert paused["status"] == "paused"
        assert console.client.app.state.console.streams == 1  # type: ignore[attr-defined]

    state = console.client.app.state.console  # type: ignore[attr-defined]
    wait_for(lambda: state.streams == 0, "the closed stream to be given back", DEADLINE)
    assert console.client.app.state.console.streams == 0  # type: ignore[attr-defined]


def test_a_browser_that_reconnects_resumes_after_the_last_event_it_saw(console: Console) -> None:
    run, _ = console.made["forked"]
    path = f"/api/runs/{run.run_id}/stream?after=0"
    with stream(console, path, **{"Last-Event-ID": "3"}) as arrived:
        _, event, _ = take(arrived, "event")
        assert event["cursor"] == 4


def test_a_cursor_that_is_not_ascii_digits_is_a_422(console: Console) -> None:
    run, _ = console.made["forked"]
    path = f"/api/runs/{run.run_id}/stream"
    # b"\xb2" is "²" as Starlette reads header bytes (Latin-1): str.isdigit() takes it
    for sent in (b"\xb2", "٣".encode(), b"1e3", b"+1", b"-1", b"1" * 19):
        headers = {**console.bearer(VIEWER), "Last-Event-ID": sent}
        response = console.client.get(path, headers=headers)  # type: ignore[arg-type]
        assert response.status_code == 422, (sent, response.text)
        assert response.json()["error"]["field"] == "Last-Event-ID"
    response = console.client.get(f"{path}?after=-1", headers=console.bearer(VIEWER))
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == "after"


def test_a_user_may_have_only_so_many_streams_open(
    console: Console, monkeypatch: pytest.MonkeyPatch
) -> None:
    live = console.client.app.state.console  # type: ignore[attr-defined]
    monkeypatch.setattr(live, "streams_per_user", 2)
    run, _ = console.made["forked"]
    path = f"/api/runs/{run.run_id}/stream"
    with stream(console, path) as first, stream(console, path) as second:
        take(first, "status")
        take(second, "status")
        with console.client.stream("GET", path, headers=console.bearer(VIEWER)) as third:
            assert third.status_code == 429  # (a 200 would stream on: its body is not read)
            error = json.loads(third.read())["error"]
            assert error["code"] == "too_many_streams"
            assert "default-src 'self'" in third.headers["content-security-policy"]
        with stream(console, path, user=OPERATOR) as theirs:  # each user has slots of their own
            take(theirs, "status")
    wait_for(lambda: live.streams == 0, "the streams' slots to be given back", DEADLINE)
    with stream(console, path) as again:  # a closed stream gave its slot back
        take(again, "status")


def test_a_slot_given_back_twice_frees_only_itself(console: Console) -> None:
    live = console.client.app.state.console  # type: ignore[attr-defined]
    release = live.take_stream("ann")
    live.take_stream("ann")
    release()
    release()  # a second give-back must not free the other stream's slot
    assert live.streams == 1


def test_a_status_the_database_cannot_give_is_skipped_and_the_stream_goes_on(
    console: Console, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = console.scenario.running()
    store = console.store
    read = views.run_view
    tried = threading.Event()

    def unreachable(*args: Any, **kwargs: Any) -> Any:
        tried.set()
        raise psycopg.OperationalError("server closed the connection unexpectedly")

    with stream(console, f"/api/runs/{run.run_id}/stream?after=1") as arrived:
        take(arrived, "status")
        monkeypatch.setattr(views, "run_view", unreachable)
        store.record(run.channel_id, kind="model.call", payload={}, expected_cursor=1)
        assert take(arrived, "event")[1]["cursor"] == 2
        assert tried.wait(DEADLINE)  # the status after it could not be read
        monkeypatch.setattr(views, "run_view", read)
        store.record(run.channel_id, kind="model.call", payload={}, expected_cursor=2)
        assert take(arrived, "event")[1]["cursor"] == 3
        _, status, _ = take(arrived, "status")
        assert status["head_cursor"] == 3
