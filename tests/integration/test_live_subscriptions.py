"""Subscriptions under racing writers: no gap, no duplicate, in order (SQLite, PostgreSQL).

A channel subscriber starts at a middle cursor and a global subscriber at the beginning,
while 4 writers (2 threads here, 2 separate processes) race on the channel and another
channel keeps being written too.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import actae

RACER = Path(__file__).with_name("racer.py")
spec = importlib.util.spec_from_file_location("actae_test_racer_live", RACER)
assert spec is not None
assert spec.loader is not None
racer = importlib.util.module_from_spec(spec)
spec.loader.exec_module(racer)
TIMEOUT = 60


class Collector:
    """Consumes a subscription in a thread; the test waits on conditions, not sleeps."""

    def __init__(self, sub: actae.Subscription) -> None:
        self.sub = sub
        self.seen: list[actae.ChannelEvent] = []
        self.error: BaseException | None = None
        self.changed = threading.Condition()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            for event in self.sub:
                with self.changed:
                    self.seen.append(event)
                    self.changed.notify_all()
        except BaseException as error:  # reported by wait_until, in the test's thread
            with self.changed:
                self.error = error
                self.changed.notify_all()

    def wait_until(self, condition: object) -> None:
        assert callable(condition)
        with self.changed:
            met = self.changed.wait_for(
                lambda: self.error is not None or condition(self.seen), timeout=TIMEOUT
            )
        assert self.error is None, f"the subscriber stopped: {self.error!r}"
        assert met
        self.sub.stop()
        self.thread.join(TIMEOUT)


def test_subscribers_miss_nothing_while_writers_race(durable_url: str) -> None:
    store = actae.open(durable_url)
    run = store.start_run("race", agent_id="a", state={"by": "start", "i": -1})
    other = store.start_run("other", agent_id="a", state={})
    channel = str(run.channel_id)
    for n in range(9):
        store.record(channel, kind="warmup", payload={"n": n}, expected_cursor=n + 1)

    middle = Collector(store.subscribe(channel, after=5))
    everything = Collector(store.subscribe())
    processes = [
        subprocess.Popen(
            [sys.executable, str(RACER), durable_url, channel, f"p{n}", "1", "15"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(2)
    ]
    for process in processes:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "ready"
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    raced: dict[str, list[dict[str, Any]]] = {}
    failures: list[BaseException] = []

    def race(name: str) -> None:
        try:
            raced[name] = racer.race(store, channel, name, 15)
        except BaseException as error:  # a dead racer must fail the test, not go unnoticed
            failures.append(error)

    threads = [threading.Thread(target=race, args=(f"t{n}",)) for n in range(2)]
    for thread in threads:
        thread.start()
    for n in range(20):
        store.record(other.channel_id, kind="other", payload={"n": n}, expected_cursor=n + 1)
    for thread in threads:
        thread.join(TIMEOUT)
    assert not any(thread.is_alive() for thread in threads)
    assert failures == []
    for name in ("t0", "t1"):  # every attempt of each racer has its outcome
        attempts = {outcome["op"] for outcome in raced[name]}
        assert attempts == {f"{name}:{i}" for i in range(15)}
    for process in processes:
        process.communicate(timeout=TIMEOUT)
        assert process.returncode == 0

    head = store.head(channel).cursor
    total = head + store.head(other.channel_id).cursor
    middle.wait_until(lambda seen: bool(seen) and seen[-1].cursor == head)
    everything.wait_until(lambda seen: len(seen) >= total)

    assert [e.cursor for e in middle.seen] == list(range(6, head + 1))
    assert middle.seen == store.events(channel, after=5)
    assert len(everything.seen) == total
    for channel_id in (run.channel_id, other.channel_id):
        mine = [e for e in everything.seen if e.channel_id == channel_id]
        assert [(e.cursor, e.payload) for e in mine] == [
            (e.cursor, e.payload) for e in store.events(channel_id)
        ]
    positions = [e.position or 0 for e in everything.seen]
    assert positions == sorted(positions)
    assert head > 10 + 2, "the racers did write"
    store.close()
