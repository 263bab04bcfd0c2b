"""Costs that must not grow with history, and resources that must be released."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

import actae
from tests.helpers import local_ports


@pytest.fixture
def counted(store: actae.Store) -> Iterator[list[int]]:
    """Counts stored events decoded by the store while a test runs."""
    mapper = store._service.mapper
    decoded = [0]
    original = mapper.to_domain_event

    def counting(stored: Any) -> Any:
        decoded[0] += 1
        return original(stored)

    mapper.to_domain_event = counting  # type: ignore[method-assign,assignment]
    yield decoded
    mapper.to_domain_event = original  # type: ignore[method-assign]


def test_head_state_and_writes_read_a_constant_number_of_events(
    store: actae.Store, counted: list[int]
) -> None:
    run = store.start_run("long", agent_id="a", state={"n": 0})
    head = store.head(run.channel_id)
    for n in range(150):
        head = store.record(run.channel_id, kind="k", payload={"n": n}, expected_cursor=head.cursor)

    for call in (
        lambda: store.head(run.channel_id),
        lambda: store.state_at(run.channel_id),
        lambda: store.state_at(run.channel_id, cursor=75),
        lambda: store.record(run.channel_id, kind="k", payload={}, expected_cursor=151),
        lambda: store.transition(
            run.channel_id, kind="s", payload={}, state={}, expected_version=1, expected_cursor=152
        ),
    ):
        counted[0] = 0
        call()
        assert counted[0] <= 2, counted[0]


@pytest.mark.postgres
@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
def test_close_releases_every_postgres_connection(pg_url: str, pg_dsn: str) -> None:
    """Counted by this process's own sockets: the server is shared with other tests' stores."""
    count = (
        "SELECT count(*) FROM pg_stat_activity WHERE client_port = ANY(%s)"
        " AND client_addr IS NOT NULL"
    )
    with psycopg.connect(pg_dsn, autocommit=True) as probe:

        def ours() -> Any:
            return probe.execute(count, (sorted(local_ports(os.getpid())),)).fetchone()

        before = ours()
        store = actae.open(pg_url)
        run = store.start_run("wf", agent_id="a", state={})
        store.recover(run.channel_id)
        during = ours()
        store.close()
        store.close()
        # A server backend leaves pg_stat_activity a moment after its client hung up.
        deadline = time.monotonic() + 10
        while (after := ours()) != before and time.monotonic() < deadline:
            time.sleep(0.01)
    assert before is not None
    assert during is not None
    assert during[0] > before[0]
    assert after == before


@pytest.mark.postgres
def test_a_worker_step_is_two_round_trips_on_postgres(pg_url: str) -> None:
    """One statement asks: may the run go on, and did this step run before? One writes."""
    with actae.open(pg_url) as store:
        run = store.start_run("steps", agent_id="a", state={})
        context = store.resume(run.run_id, worker="w")
        context.step("warm", lambda: 0)
        recorder = store._service.recorder
        calls: list[str] = []
        for name in ("select_together", "select_events", "insert_events"):
            original = getattr(recorder, name)

            def counting(*args: Any, _name: str = name, _call: Any = original, **kw: Any) -> Any:
                calls.append(_name)
                return _call(*args, **kw)

            setattr(recorder, name, counting)
        assert context.step("think", lambda: {"answer": 42}) == {"answer": 42}
        assert calls == ["select_together", "insert_events"]
        again = store.resume(run.run_id, worker="w2")  # the code runs again from the top
        calls.clear()
        assert again.step("warm", lambda: 1) == 0
        assert again.step("think", lambda: {"answer": 0}) == {"answer": 42}
        assert "insert_events" not in calls
