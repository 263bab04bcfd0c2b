"""A fork of a workflow replays its parent's recorded prefix instead of executing it again.

Forking exists because re-running a good prefix is wasteful, and for agents it is worse: a
re-run samples the model afresh and repeats side effects. The model's and the provider's own
call logs prove what ran.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

import actae


@dataclass
class World:
    """The model and the mail provider, each keeping its own log of calls."""

    model_calls: list[str] = field(default_factory=list)
    sent: dict[str, int] = field(default_factory=dict)  # idempotency key -> times executed

    def model(self, prompt: str) -> Callable[[], str]:
        def call() -> str:
            self.model_calls.append(prompt)
            return f"{prompt} #{len(self.model_calls)}"

        return call

    def send(self, key: str, token: int) -> dict[str, Any]:
        self.sent[key] = self.sent.get(key, 0) + 1
        return {"message_id": f"m-{len(self.sent)}"}


def research_draft_send(world: World) -> Callable[[actae.RunContext], dict[str, Any]]:
    def workflow(ctx: actae.RunContext) -> dict[str, Any]:
        notes = ctx.step("research", world.model("research"))
        draft = ctx.step("draft", world.model(f"draft from {notes}"))
        receipt = ctx.effect("send", world.send)
        return {"draft": draft, "receipt": receipt}

    return workflow


def _completed_run(store: actae.Store, world: World) -> tuple[actae.RunInfo, dict[str, Any]]:
    run = store.start_run("mail-1", agent_id="mailer", state={"to": "a@example.com"})
    result = research_draft_send(world)(store.resume(run.run_id, worker="w1"))
    store.complete_run(run.run_id, result)
    return run, result


def test_a_fork_at_the_head_re_executes_nothing(store: actae.Store) -> None:
    world = World()
    run, result = _completed_run(store, world)
    head = store.head(run.channel_id).cursor
    before = (list(world.model_calls), dict(world.sent))

    fork = store.fork(run.channel_id, at=head, operation_id="fork-head", reason="audit")
    replayed = research_draft_send(world)(store.resume(fork.child_run_id, worker="w2"))

    assert replayed == result
    assert world.model_calls == before[0]  # model calls: 0
    assert world.sent == before[1]  # effects: 0
    assert fork.inherited == actae.Inheritance(through_cursor=head, steps=2, effects=1, in_doubt=[])
    child_events = [e.kind for e in store.events(fork.child_channel_id)]
    assert child_events == ["run.forked"]  # replayed from the parent's log, nothing new


def test_a_fork_in_the_middle_replays_the_prefix_and_goes_live_after_it(
    store: actae.Store,
) -> None:
    world = World()
    run, _ = _completed_run(store, world)
    research_cursor = next(
        e.cursor for e in store.events(run.channel_id) if e.kind == "step.result"
    )

    fork = store.fork(run.channel_id, at=research_cursor, operation_id="fork-mid")
    child = research_draft_send(world)(store.resume(fork.child_run_id, worker="w2"))

    assert world.model_calls == ["research", "draft from research #1", "draft from research #1"]
    assert child["draft"] == "draft from research #1 #3"  # sampled afresh after the boundary
    assert len(world.sent) == 2  # the child's own send, under its own idempotency key
    assert all(times == 1 for times in world.sent.values())
    assert fork.inherited is not None
    assert (fork.inherited.steps, fork.inherited.effects) == (1, 0)


def test_a_fork_of_a_fork_inherits_through_both(store: actae.Store) -> None:
    world = World()
    run, result = _completed_run(store, world)
    first = store.fork(run.channel_id, at=store.head(run.channel_id).cursor)
    research_draft_send(world)(store.resume(first.child_run_id, worker="w2"))
    calls = len(world.model_calls)

    second = store.fork(first.child_channel_id, at=1, operation_id="fork-of-fork")
    replayed = research_draft_send(world)(store.resume(second.child_run_id, worker="w3"))

    assert replayed == result
    assert len(world.model_calls) == calls
    assert len(world.sent) == 1
    assert second.inherited is not None
    assert second.inherited.steps == 2


def test_an_effect_in_flight_at_the_boundary_is_never_started_again(
    store: actae.Store, clock: actae.ManualClock
) -> None:
    world = World()
    run = store.start_run("mail-2", agent_id="mailer", state={})
    workflow = research_draft_send(world)

    def dies_inside_the_send(key: str, token: int) -> dict[str, Any]:
        raise SystemExit  # stands for a SIGKILL after the request left

    ctx = store.resume(run.run_id, worker="w1")
    ctx.step("research", world.model("research"))
    ctx.step("draft", world.model("draft from research #1"))
    with pytest.raises(SystemExit):
        ctx.effect("send", dies_inside_the_send)
    clock.advance(31)
    fork = store.fork(run.channel_id, at=store.head(run.channel_id).cursor)
    (parent_key,) = fork.inherited.in_doubt if fork.inherited else []

    with pytest.raises(actae.EffectBlockedError) as blocked:
        workflow(store.resume(fork.child_run_id, worker="w2"))
    assert blocked.value.effect_key == parent_key
    assert world.sent == {}

    store.override(
        parent_key, "completed", actor="ops", reason="sent", result={"message_id": "m-9"}
    )
    replayed = workflow(store.resume(fork.child_run_id, worker="w2"))

    assert replayed["receipt"] == {"message_id": "m-9"}
    assert world.sent == {}
    assert len(world.model_calls) == 2


def test_an_approval_before_the_boundary_is_inherited(store: actae.Store) -> None:
    run = store.start_run("appr", agent_id="a", state={})
    with pytest.raises(actae.RunSuspended):
        store.resume(run.run_id, worker="w").wait_for_approval("manager")
    store.approve(run.run_id, "manager", actor="alice")

    fork = store.fork(run.channel_id, at=store.head(run.channel_id).cursor)
    decision = store.resume(fork.child_run_id, worker="w").wait_for_approval("manager")

    assert (decision.approved, decision.actor) == (True, "alice")
    assert fork.inherited is not None
    assert fork.inherited.decisions == 1


def test_an_unfinished_parent_effect_blocks_the_fork_until_it_is_abandoned(
    store: actae.Store, clock: actae.ManualClock
) -> None:
    """A parent's effect that failed and awaits its retry may still happen: the fork waits."""
    world = World()
    run = store.start_run("mail-3", agent_id="mailer", state={})

    def rate_limited(key: str, token: int) -> dict[str, Any]:
        raise TimeoutError("provider timed out")

    ctx = store.resume(run.run_id, worker="w1")
    ctx.step("research", world.model("research"))
    ctx.step("draft", world.model("draft from research #1"))
    with pytest.raises(actae.RetryNotDueError):
        ctx.effect("send", rate_limited)
    fork = store.fork(run.channel_id, at=store.head(run.channel_id).cursor)
    workflow = research_draft_send(world)

    with pytest.raises(actae.EffectBlockedError) as blocked:
        workflow(store.resume(fork.child_run_id, worker="w2"))
    assert blocked.value.status == "retry_scheduled"
    assert world.sent == {}

    store.abandon(blocked.value.effect_key, actor="ops", reason="the parent will not send it")
    workflow(store.resume(fork.child_run_id, worker="w2"))

    (child_key,) = world.sent
    assert child_key.startswith(str(fork.child_run_id))  # the fork's own send, under its key


def test_records_of_any_kind_are_inherited(store: actae.Store) -> None:
    """A record's kind is the workflow's choice, even one that looks like a ledger note."""
    run = store.start_run("kinds", agent_id="a", state={})
    kinds = ["effect.custom", "run.approved", "note"]

    def workflow(ctx: actae.RunContext) -> list[int]:
        return [ctx.record(kind, {"n": n}).cursor for n, kind in enumerate(kinds)]

    cursors = workflow(store.resume(run.run_id, worker="w1"))
    fork = store.fork(run.channel_id, at=store.head(run.channel_id).cursor)

    assert workflow(store.resume(fork.child_run_id, worker="w2")) == cursors
    assert [e.kind for e in store.events(fork.child_channel_id)] == ["run.forked"]
    assert fork.inherited is not None
    assert fork.inherited.records == 3
