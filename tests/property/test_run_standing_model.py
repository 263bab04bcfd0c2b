"""Property: for random run histories, run_status holds the domain's standing of the run.

A run goes through random waits, answers, expiries, pauses, failures, retries and endings,
while its effects are claimed, completed, failed (retried or needing review), reconciled and
abandoned, and leases run out on a manual clock; any move the store refuses is skipped.
After every step the projector catches up, and the run's ``status`` and ``next_action`` in
run_status equal :func:`actae.domain.status.standing` of the facts the store itself gives
of the run and its effects (``store.run``, ``store.effect``): the facts the read models
gather from their tables are the run's facts, and they are derived by the same rule.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import actae
from actae.domain.status import RUNNING_STATUSES, RunFacts, Standing, standing

KEYS = ("e0", "e1", "e2")
"""A run's effect keys after its own prefix, in the same order in every collation (the rule
names the first)."""
LEASE = 10.0
REVIEW = actae.RetryPolicy(max_attempts=1, initial_delay=1.0)
E = actae.EffectStatus

EFFECT_STEPS = ("claim", "complete", "fail", "reconcile", "abandon")
STEPS: list[tuple[Any, ...]] = [
    *(("claim", k, review) for k in KEYS for review in (False, True)),
    *(("advance", seconds) for seconds in (1.0, LEASE, 40.0) for _ in range(2)),
    *(("complete", k) for k in KEYS),
    *(("fail", k, later) for k in KEYS for later in (True, False)),
    *(("reconcile", k, outcome) for k in KEYS for outcome in ("completed", "failed")),
    *(("abandon", k) for k in KEYS),
    *(("suspend", r, expires) for r in ("approval", "signal") for expires in (True, False)),
    *((name,) for name in ("wake", "approve", "pause", "unpause", "fail_run", "retry_run")),
    *((name,) for name in ("cancel", "complete_run")),
]
"""Every step a history takes, mostly the effects' moves and time (so that a run lives long
enough to have some), claims first (what a shrunk history starts with)."""
steps = st.sampled_from(STEPS)


class History:
    """One run on a store, moved by the steps; the tokens of its effects' last claims."""

    def __init__(self, store: actae.Store, clock: actae.ManualClock) -> None:
        self.store = store
        self.clock = clock
        self.run = store.start_run("wf", agent_id="a", state={})
        self.prefix = f"{self.run.run_id}:"  # effect keys are unique in the store
        self.tokens: dict[str, int] = {}
        self.registered: set[str] = set()

    def apply(self, step: tuple[Any, ...]) -> None:
        """Take the step; a move the store refuses (an ``ActaeError``) changes nothing."""
        name, *args = step
        if name in EFFECT_STEPS:
            args[0] = self.prefix + args[0]
        with contextlib.suppress(actae.ActaeError):
            getattr(self, f"_{name}")(*args)

    def _claim(self, effect: str, review: bool) -> None:
        run_id = self.run.run_id
        policy = REVIEW if review else None
        claim = self.store.claim(effect, run_id=run_id, worker="w", lease=LEASE, retry=policy)
        self.registered.add(effect)
        if claim.token is not None:
            self.tokens[effect] = claim.token

    def _complete(self, effect: str) -> None:
        token = self.tokens.get(effect, 1)
        self.store.complete_effect(effect, token=token, worker="w", result={"ok": True})

    def _fail(self, effect: str, later: bool) -> None:
        token = self.tokens.get(effect, 1)
        retry_after = 30 if later else None
        self.store.fail_effect(effect, token=token, worker="w", error="x", retry_after=retry_after)

    def _reconcile(self, effect: str, outcome: str) -> None:
        self.store.reconcile(effect, outcome, actor="ops", result={"ok": True})

    def _abandon(self, effect: str) -> None:
        self.store.abandon(effect, actor="ops", reason="gave up")

    def _advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    def _suspend(self, reason: str, expires: bool) -> None:
        seconds, on_expiry = (5.0, "escalate") if expires else (None, None)
        run_id = self.run.run_id
        self.store.suspend(run_id, reason=reason, name="n", seconds=seconds, on_expiry=on_expiry)

    def _wake(self) -> None:
        self.store.wake_due(self.run.run_id)

    def _approve(self) -> None:
        self.store.approve(self.run.run_id, "n", actor="ops")

    def _pause(self) -> None:
        self.store.pause(self.run.run_id, actor="ops", reason="look")

    def _unpause(self) -> None:
        self.store.unpause(self.run.run_id, actor="ops", reason="go on")

    def _fail_run(self) -> None:
        self.store.fail_run(self.run.run_id, "ValueError: no", actor="w")

    def _retry_run(self) -> None:
        self.store.retry_run(self.run.run_id, actor="ops", reason="fixed")

    def _cancel(self) -> None:
        self.store.cancel(self.run.run_id, actor="ops", reason="stop")

    def _complete_run(self) -> None:
        self.store.complete_run(self.run.run_id, {"done": True})

    def facts(self) -> RunFacts:
        """The run's facts as the store gives them: its events and its effects' ledger."""
        info = self.store.run(self.run.run_id)
        wait = info.waiting
        lifecycle = actae.RunStatus.RUNNING if info.status in RUNNING_STATUSES else info.status
        return RunFacts(
            lifecycle=lifecycle,
            forgotten=info.forgotten_at is not None,
            waiting_reason=None if wait is None else wait.reason,
            waiting_name=None if wait is None else wait.name,
            escalated=wait is not None and wait.escalated,
            error=info.error,
            agent_id=info.agent_id,
            effects=self.effects(),
        )

    def effects(self) -> dict[actae.EffectStatus, str]:
        """The first key of the run's effects in each status that asks for something."""
        asking: dict[actae.EffectStatus, str] = {}
        for effect in sorted(self.registered):
            info = self.store.effect(effect)
            status = E.IN_DOUBT if info.in_doubt and info.status is E.CLAIMED else info.status
            if status in (E.NEEDS_REVIEW, E.IN_DOUBT, E.RETRY_SCHEDULED):
                asking.setdefault(status, effect)
        return asking

    def projected(self) -> Standing:
        """The run's standing as run_status holds it, the projector caught up."""
        projector = self.store.projector()
        projector.catch_up()
        (row,) = [
            r
            for r in projector.query("SELECT run_id, status, next_action FROM run_status")
            if str(r["run_id"]) == str(self.run.run_id)
        ]
        return Standing(actae.RunStatus(row["status"]), row["next_action"])


def check(store: actae.Store, clock: actae.ManualClock, history: list[tuple[Any, ...]]) -> None:
    run = History(store, clock)
    assert run.projected() == standing(run.facts())
    for step in history:
        run.apply(step)
        assert run.projected() == standing(run.facts()), step


SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(history=st.lists(steps, max_size=20))
def test_memory_run_status_is_the_domains_standing(history: list[tuple[Any, ...]]) -> None:
    clock = actae.ManualClock()
    with actae.open("memory://", clock=clock) as store:
        check(store, clock, history)


def on_one_store(url: str, examples: int) -> None:
    """Histories of as many runs on one store (each run's effect keys its own)."""
    clock = actae.ManualClock()
    with actae.open(url, clock=clock) as store:

        @settings(SETTINGS, max_examples=examples)
        @given(history=st.lists(steps, max_size=15))
        def histories(history: list[tuple[Any, ...]]) -> None:
            check(store, clock, history)

        histories()


def test_sqlite_run_status_is_the_domains_standing(tmp_path: Path) -> None:
    on_one_store(f"sqlite:///{tmp_path / 'standing.db'}", 20)


@pytest.mark.postgres
def test_postgres_run_status_is_the_domains_standing(pg_url: str) -> None:
    on_one_store(pg_url, 15)
