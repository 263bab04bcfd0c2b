"""PostgreSQL: many threads and processes race on one channel; the log stays gapless.

Every attempt must end as exactly one of: written (a unique cursor), ConflictError, or a
replay of its own earlier write. The log must hold exactly the written attempts, once each.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import actae

pytestmark = pytest.mark.postgres

RACER = Path(__file__).with_name("racer.py")
spec = importlib.util.spec_from_file_location("actae_test_racer", RACER)
assert spec is not None
assert spec.loader is not None
racer = importlib.util.module_from_spec(spec)
spec.loader.exec_module(racer)

THREADS = 8
PROCESSES = 2
THREADS_PER_PROCESS = 4
ATTEMPTS = 12


def start_processes(url: str, channel_id: str) -> list[subprocess.Popen[str]]:
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                str(RACER),
                url,
                channel_id,
                f"p{n}",
                str(THREADS_PER_PROCESS),
                str(ATTEMPTS),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(PROCESSES)
    ]
    for process in processes:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "ready"
    return processes


def test_racing_writers_leave_a_gapless_log(pg_url: str) -> None:
    store = actae.open(pg_url)
    run = store.start_run("race", agent_id="a", state={"by": "start", "i": -1})
    channel_id = str(run.channel_id)
    processes = start_processes(pg_url, channel_id)
    outcomes: list[dict[str, Any]] = []
    barrier = threading.Barrier(THREADS + 1)

    def thread_racer(index: int) -> None:
        barrier.wait(timeout=30)
        outcomes.extend(racer.race(store, channel_id, f"t{index}", ATTEMPTS))

    threads = [threading.Thread(target=thread_racer, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    barrier.wait(timeout=30)
    for process in processes:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    for thread in threads:
        thread.join(timeout=120)
    for process in processes:
        out, _ = process.communicate(timeout=120)
        assert process.returncode == 0
        outcomes.extend(json.loads(line) for line in out.splitlines())

    total = (THREADS + PROCESSES * THREADS_PER_PROCESS) * ATTEMPTS
    first_tries = [o for o in outcomes if o["outcome"] in ("written", "conflict")]
    written = {o["op"]: o["cursor"] for o in outcomes if o["outcome"] == "written"}
    retried = {o["op"]: o["cursor"] for o in outcomes if o["outcome"] == "retried"}
    assert len(first_tries) == total
    assert all(o["replayed"] is False for o in outcomes if o["outcome"] == "written")
    assert all(o["replayed"] is True for o in outcomes if o["outcome"] == "retried")
    assert retried == written, "every retry replayed its own original cursor"
    assert sorted(written.values()) == list(range(2, 2 + len(written))), "no gap, no duplicate"

    events = store.events(channel_id)
    assert [e.cursor for e in events] == list(range(1, len(written) + 2))
    assert {e.operation_id: e.cursor for e in events[1:]} == written
    for event in events[1:]:
        state = store.state_at(channel_id, cursor=event.cursor)
        assert (state.version, state.state) == (event.cursor, event.payload)
    assert any(op.startswith("p") for op in written), "a separate process won some rounds"
    assert any(op.startswith("t") for op in written), "a thread won some rounds"
    assert any(o["outcome"] == "conflict" for o in outcomes), "and some lost"
    store.close()
