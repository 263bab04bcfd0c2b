"""A run's event stream: history, then live events and status changes, until the client goes.

The stream is read in a thread that hands each server-sent event to the test through a
queue, so every wait has a deadline.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.console.harness import VIEWER, Console

DEADLINE = 10.0

Message = tuple[str, Any, str | None]
"""A server-sent event: its type, its data (parsed JSON) and its id."""


@contextmanager
def stream(console: Console, path: str, **headers: str) -> Iterator[queue.Queue[Message]]:
    """The events of ``path``, as they arrive, until the block ends (the client hangs up)."""
    arrived: queue.Queue[Message] = queue.Queue()
    with console.client.stream(
        "GET", path, headers={**console.bearer(VIEWER), **headers}
    ) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")

        def read() -> None:
            kind, data, event_id = "message", None, None
            try:
                for line in response.iter_lines():
                    if line.startswith("event: "):
                        kind = line[7:]
                    elif line.startswith("id: "):
                        event_id = line[4:]
                    elif line.startswith("data: "):
                        data = json.loads(line[6:])
                    elif not line and data is not None:
                        arrived.put((kind, data, event_id))
                        kind, data, event_id = "message", None, None
            except Exception:  # noqa: S110 - the test hung up: the stream closed under us
                pass

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        yield arrived
    reader.join(DEADLINE)


def take(arrived: queue.Queue[Message], kind: str) -> Message:
    """The next event of type ``kind`` (skipping others), within the deadline."""
    deadline = time.monotonic() + DEADLINE
    while True:
        message = arrived.get(timeout=max(0.0, deadline - time.monotonic()))
        if message[0] == kind:
            return message


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

    deadline = time.monotonic() + DEADLINE
    while console.client.app.state.console.streams and time.monotonic() < deadline:  # type: ignore[attr-defined]
        time.sleep(0.01)
    assert console.client.app.state.console.streams == 0  # type: ignore[attr-defined]


def test_a_browser_that_reconnects_resumes_after_the_last_event_it_saw(console: Console) -> None:
    run, _ = console.made["forked"]
    path = f"/api/runs/{run.run_id}/stream?after=0"
    with stream(console, path, **{"Last-Event-ID": "3"}) as arrived:
        _, event, _ = take(arrived, "event")
        assert event["cursor"] == 4
