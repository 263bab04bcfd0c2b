"""What a console test holds: the client, the store and its runs, and the users' tokens.

Also how a test follows an event stream (read in a thread that hands each server-sent event
to the test through a queue, so every wait has a deadline) and holds the live projector.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

import actae
from tests.console.scenario import Scenario

OPERATOR = "alice"
VIEWER = "victor"
DEADLINE = 10.0
Message = tuple[str, Any, str | None]
"""A server-sent event: its type, its data (parsed JSON) and its id."""
LIVE_PROJECTOR = "actae projector"
"""The name of the thread the console's live projector runs in (``Projector.start``)."""


@dataclass
class Console:
    """A running console (through TestClient), its store and data, and its users' tokens."""

    client: TestClient
    store: actae.Store
    scenario: Scenario
    made: dict[str, Any]
    tokens: dict[str, str]
    auth_file: Path

    def bearer(self, name: str = OPERATOR) -> dict[str, str]:
        """The headers of an API client signed in as ``name``."""
        return {"Authorization": f"Bearer {self.tokens[name]}"}


@contextmanager
def held_projector(console: Console, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The console's live projector, parked before its next batch until the block ends.

    Only its own thread is held: a catch-up from any other thread (a request, the test)
    projects as usual. The block starts once the thread is parked, so nothing the test
    writes inside it reaches the read models unless a request catches them up itself.
    """
    projector = console.store.projector()
    batch = projector.process_batch
    parked, release = threading.Event(), threading.Event()

    def held(**options: Any) -> int:
        if threading.current_thread().name == LIVE_PROJECTOR:
            parked.set()
            release.wait(DEADLINE)
            return 0
        return batch(**options)

    monkeypatch.setattr(projector, "process_batch", held)
    try:
        assert parked.wait(DEADLINE), "the live projector never came round to its next batch"
        yield
    finally:
        monkeypatch.setattr(projector, "process_batch", batch)
        release.set()


@contextmanager
def stream(
    console: Console, path: str, user: str = VIEWER, **headers: str
) -> Iterator[queue.Queue[Message]]:
    """The events of ``path``, as they arrive, until the block ends (the client hangs up)."""
    arrived: queue.Queue[Message] = queue.Queue()
    with console.client.stream(
        "GET", path, headers={**console.bearer(user), **headers}
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
