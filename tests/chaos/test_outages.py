"""In one process: a worker, the projector and a subscription ride out a PostgreSQL restart.

Each used to end on the first restart (the worker with ``OperationalError`` from its lease,
the subscription with ``OperationalError`` from its next read). Here they keep going from
their durable positions: runs started after the restart complete, and the subscription
delivers every event exactly once, in order.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import Any

import pytest

import actae
from actae.adapters.persistence.outages import Outage, ride_out
from tests.helpers import Follower, called, wait_for
from tests.integration.lines import Lines

pytestmark = pytest.mark.postgres

DEADLINE = 60.0
ACTAE = [sys.executable, "-m", "actae.adapters.cli"]


def workflows(restarted: threading.Event, in_step: threading.Event) -> actae.Registry:
    registry = actae.Registry()

    @registry.workflow("across")
    def across(ctx: actae.RunContext) -> None:
        def during_the_restart() -> str:
            in_step.set()
            restarted.wait(DEADLINE)
            return "done"

        ctx.step("spans the restart", during_the_restart)
        ctx.step("after", lambda: "after")

    @registry.workflow("steps")
    def steps(ctx: actae.RunContext) -> dict[str, Any]:
        total = sum(ctx.step(f"s{i}", lambda i=i: i) for i in range(3))  # type: ignore[misc]
        return {"total": total}

    return registry


def start(store: actae.Store, name: str, agent: str = "steps") -> actae.RunInfo:
    """Start a run, waiting out the restart like any client would (the call is idempotent)."""
    return ride_out(
        lambda: store.start_run(name, agent_id=agent, state={}, operation_id=name),
        Outage("test client", lambda _: None),
        within=DEADLINE,
    )


def test_a_worker_projector_and_subscription_ride_out_a_restart(
    chaos_cluster: Any, chaos_url: str
) -> None:
    with actae.open(chaos_url) as store:
        restarted, in_step = threading.Event(), threading.Event()
        before = [start(store, f"before-{i}") for i in range(3)]
        spanning = start(store, "spanning", agent="across")
        registry = workflows(restarted, in_step)
        worker = actae.Worker(store, name="w1", registry=registry, lease=5, poll_interval=0.05)
        working = threading.Thread(target=worker.run, daemon=True)
        follower = Follower(store.subscribe(poll_interval=0.05))
        working.start()
        follower.start()

        def completed(runs: list[actae.RunInfo]) -> bool:
            return all(store.run(r.run_id).status is actae.RunStatus.COMPLETED for r in runs)

        wait_for(lambda: completed(before) and in_step.is_set(), "the first runs")
        chaos_cluster.ctl("restart")  # while a step runs under its lease
        restarted.set()
        after = [start(store, f"after-{i}") for i in range(3)]
        wait_for(
            lambda: (
                follower.failures != [] or not working.is_alive() or completed([*after, spanning])
            ),
            "runs started after the restart, and the one that ran across it",
        )
        assert follower.failures == []
        assert working.is_alive(), "the worker ended on the restart"

        total = sum(len(store.events(run.channel_id)) for run in [*before, spanning, *after])
        wait_for(
            lambda: follower.failures != [] or len(follower.received) >= total, "every event, live"
        )
        worker.request_stop()
        follower.close(DEADLINE)
        working.join(DEADLINE)
        assert follower.failures == [], f"the subscription ended: {follower.failures[0]!r}"
        positions = [event.position or 0 for event in follower.received]
        assert positions == sorted(set(positions)), "an event was skipped or delivered twice"
        assert len(positions) == total
        # the restart was seen: by the worker, the projector, or (whichever statement met a
        # dead connection first) by the process's pool, which replaced its connections
        pool = store._service.recorder.datastore.pool  # type: ignore[attr-defined]
        stats = pool.get_stats()
        lost = stats.get("connections_lost", 0) + stats.get("returns_bad", 0)
        assert worker.outage.count + store.projector().outage.count + lost >= 1


def test_a_steps_result_is_recorded_after_an_outage_longer_than_the_drivers_retries(
    chaos_cluster: Any, chaos_url: str
) -> None:
    """The step ran; if its result were not waited through the outage, it would run again."""
    calls: list[str] = []
    contexts: list[actae.RunContext] = []
    registry = actae.Registry()

    @registry.workflow("outage-in-step")
    def outage_in_step(ctx: actae.RunContext) -> None:
        contexts.append(ctx)

        def step() -> str:
            calls.append("step")
            if calls == ["step"]:  # the database goes away before the result is recorded
                chaos_cluster.ctl("stop")
            return "result"

        ctx.step("s", step)

    # A short pool wait, so the driver's own retries give up within seconds, not minutes.
    with actae.open(f"{chaos_url}&connect_timeout=1") as store:
        run = store.start_run("r", agent_id="outage-in-step", state={})
        # A long lease: its first renewal, which fails during the outage, comes much later.
        worker = actae.Worker(store, name="w1", registry=registry, lease=120, poll_interval=0.05)
        working = threading.Thread(target=worker.run, daemon=True)
        working.start()
        try:
            # The context waits the outage out once the driver's own retries gave up (if it
            # did not, the worker's pass fails instead, and the step will run again).
            wait_for(
                lambda: worker.outage.ongoing or (bool(contexts) and contexts[-1].outage.ongoing),
                "a long outage",
            )
        finally:
            chaos_cluster.ctl("start")
        wait_for(
            lambda: (
                not working.is_alive() or store.run(run.run_id).status is actae.RunStatus.COMPLETED
            ),
            "the run to complete",
        )
        worker.request_stop()
        working.join(DEADLINE)
        assert calls == ["step"]
        assert contexts[0].outage.count == 1


def test_a_worker_and_a_subscription_outlast_an_outage_longer_than_the_drivers_retries(
    chaos_cluster: Any, chaos_url: str
) -> None:
    """A workflow's own write meets the outage: the run is not failed, and nobody gives up."""
    calls: list[str] = []
    registry = actae.Registry()

    @registry.workflow("write-in-outage")
    def write_in_outage(ctx: actae.RunContext) -> None:
        ctx.step("a", lambda: called(calls, "a", "a"))
        if "stopped" not in calls:
            calls.append("stopped")
            chaos_cluster.ctl("stop")
        ctx.record("note", {"during": "the outage"})  # fails until the database is back
        ctx.step("b", lambda: called(calls, "b", "b"))

    with actae.open(f"{chaos_url}&connect_timeout=1") as store:
        run = store.start_run("r", agent_id="write-in-outage", state={})
        worker = actae.Worker(
            store, name="w1", registry=registry, lease=120, poll_interval=0.05, out=sys.stderr
        )
        working = threading.Thread(target=worker.run, daemon=True)
        follower = Follower(store.subscribe(run.channel_id, poll_interval=0.05))
        working.start()
        follower.start()
        try:
            wait_for(
                lambda: (
                    not working.is_alive()
                    or (worker.outage.ongoing and follower.subscription.outage.ongoing)
                ),
                "the worker and the subscription to wait the outage out",
            )
        finally:
            chaos_cluster.ctl("start")
        wait_for(
            lambda: (
                not working.is_alive()
                or store.run(run.run_id).status
                in (actae.RunStatus.COMPLETED, actae.RunStatus.FAILED)
            ),
            "the run to end",
        )
        assert working.is_alive(), "the worker ended on the outage"
        assert store.run(run.run_id).status is actae.RunStatus.COMPLETED
        total = len(store.events(run.channel_id))
        wait_for(
            lambda: follower.failures != [] or len(follower.received) >= total,
            "every event of the run",
        )
        worker.request_stop()
        follower.close(DEADLINE)
        working.join(DEADLINE)
        assert follower.failures == [], f"the subscription ended: {follower.failures[0]!r}"
        assert [event.cursor for event in follower.received] == list(range(1, total + 1))
        assert calls == ["a", "stopped", "b"]


@pytest.mark.parametrize(
    ("command", "ready"),
    [(["worker", "--import", "json"], "working on"), (["project"], "caught up")],
)
def test_a_process_started_during_an_outage_waits_for_the_database(
    chaos_cluster: Any, chaos_url: str, command: list[str], ready: str
) -> None:
    """A supervisor restarts processes during an outage as readily as after one."""
    actae.open(chaos_url).close()  # the store exists; its server is about to be down
    chaos_cluster.ctl("stop")
    process = None
    try:
        process = subprocess.Popen(
            [*ACTAE, *command, "--db", chaos_url, "--wait-for-db", "60"],
            stderr=subprocess.PIPE,
            text=True,
        )
        assert process.stderr is not None
        lines = Lines(process.stderr)
        first = lines.next(DEADLINE)
        assert "database unreachable" in first, first
    finally:
        chaos_cluster.ctl("start")
    try:
        said = [lines.next(DEADLINE) for _ in range(2)]
        assert any(ready in line for line in said), said
        assert "database back after" in said[0], said
        assert process.poll() is None
    finally:
        process.terminate()
        process.wait(DEADLINE)
