"""Property: random ledger sequences agree with a plain model of one effect.

Claims by several workers, heartbeats, completions and failures with current and stale
tokens, lease expiry on a manual clock, attempts' deadlines (no takeover nor reconciliation
before one passes, no completion after it; an attempt recorded in doubt), reconciliation with
and without a token, abandon.
After every step the store's view of the effect equals the model's, and the run's channel
holds exactly one note per ledger outcome.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

import actae

KEY = "effect-under-test"
LEASE = 10.0
RETRY_AFTER = 5.0
POLICY = actae.RetryPolicy(max_attempts=3, initial_delay=1.0, max_delay=1.0)
S = actae.EffectStatus


@dataclass
class Model:
    start: datetime
    now: float = 0.0
    token: int = 0
    holder: str | None = None
    expires: float = 0.0
    deadline: float = 0.0
    doubted: int | None = None  # the token whose attempt was last recorded as in doubt
    retry_at: float | None = None
    in_doubt: bool = False
    review: bool = False
    completed: bool = False
    abandoned: bool = False
    attempts: int = 0
    first_claim: float | None = None

    def status(self) -> actae.EffectStatus:
        if self.abandoned:
            return S.ABANDONED
        if self.completed:
            return S.COMPLETED
        if self.review:
            return S.NEEDS_REVIEW
        if self.holder is not None:
            return S.CLAIMED if self.now < self.expires else S.IN_DOUBT
        return S.RETRY_SCHEDULED if self.retry_at is not None else S.PENDING

    def held_error(self, token: int) -> type[Exception] | None:
        if token != self.token:
            return actae.FencingError
        if self.status() not in (S.CLAIMED, S.IN_DOUBT):
            return actae.EffectBlockedError
        return None

    def before_deadline(self) -> bool:
        """Whether the open attempt's lease ran out before its deadline passed."""
        return self.status() is S.IN_DOUBT and self.now < self.deadline


class LedgerMachine(RuleBasedStateMachine):
    url: str

    def __init__(self) -> None:
        super().__init__()
        self.clock = actae.ManualClock()
        self.store = actae.open(self.url, clock=self.clock)
        self.run = self.store.start_run("ledger", agent_id="a", state={})
        self.key = f"{self.run.run_id}:{KEY}"
        self.model = Model(start=self.clock())
        self.notes = 0
        self.registered = False
        self.holders: dict[int, str] = {}  # token -> the worker it was granted to

    def teardown(self) -> None:
        self.store.close()

    def expect(self, error: type[Exception] | None, call: object) -> bool:
        """Run ``call``; it must raise ``error`` (or succeed when None). True on success."""
        assert callable(call)
        if error is None:
            call()
            self.notes += 1
            return True
        with pytest.raises(error):
            call()
        return False

    @rule(worker=st.sampled_from(["w1", "w2", "w3"]), timeout=st.sampled_from([None, 5.0, 25.0]))
    def claim(self, worker: str, timeout: float | None) -> None:
        m = self.model
        status = m.status() if self.registered else S.PENDING
        if status is S.COMPLETED:
            assert (
                self.store.claim(
                    self.key, run_id=self.run.run_id, worker=worker, lease=LEASE, retry=POLICY
                ).status
                == "completed"
            )
            return
        error = {
            S.ABANDONED: actae.EffectBlockedError,
            S.NEEDS_REVIEW: actae.EffectBlockedError,
            S.CLAIMED: actae.LeaseHeldError,
        }.get(status)
        if error is None and self.registered and m.before_deadline():
            error = actae.DeadlineNotPassedError
        if error is None and m.retry_at is not None and m.now < m.retry_at:
            error = actae.RetryNotDueError
        claimed = self.expect(
            error,
            lambda: self.store.claim(
                self.key,
                run_id=self.run.run_id,
                worker=worker,
                lease=LEASE,
                retry=POLICY,
                timeout=timeout,
            ),
        )
        self.registered = True
        if claimed:
            m.in_doubt = status is S.IN_DOUBT
            m.token += 1
            m.holder, m.expires, m.retry_at = worker, m.now + LEASE, None
            m.deadline = m.now + (LEASE if timeout is None else timeout)
            self.holders[m.token] = worker
            m.attempts += 1
            m.first_claim = m.now if m.first_claim is None else m.first_claim

    @rule(stale=st.booleans())
    def heartbeat(self, stale: bool) -> None:
        if not self.registered:
            return
        m = self.model
        token = m.token - 1 if stale and m.token > 1 else m.token
        error = m.held_error(token)
        if error is None:
            self.store.heartbeat(
                self.key, token=token, worker=self.holders.get(token, "w1"), lease=LEASE
            )
            m.expires = m.now + LEASE
        else:
            with pytest.raises(error):
                self.store.heartbeat(
                    self.key, token=token, worker=self.holders.get(token, "w1"), lease=LEASE
                )

    @rule(stale=st.booleans())
    def complete(self, stale: bool) -> None:
        if not self.registered:
            return
        m = self.model
        token = m.token - 1 if stale and m.token > 1 else m.token
        if m.completed and token == m.token:
            self.store.complete_effect(
                self.key, token=token, worker=self.holders.get(token, "w1"), result={"ok": True}
            )
            return
        error = m.held_error(token)
        if error is None and m.now >= m.deadline:
            error = actae.DeadlinePassedError
        if self.expect(
            error,
            lambda: self.store.complete_effect(
                self.key, token=token, worker=self.holders.get(token, "w1"), result={"ok": True}
            ),
        ):
            m.completed, m.holder, m.in_doubt = True, None, False

    @rule(stale=st.booleans())
    def doubt(self, stale: bool) -> None:
        if not self.registered:
            return
        m = self.model
        token = m.token - 1 if stale and m.token > 1 else m.token
        if m.doubted == token == m.token and m.status() is S.IN_DOUBT:  # a repeat: answered
            self.store.doubt_effect(
                self.key, token=token, worker=self.holders.get(token, "w1"), reason="late"
            )
            return
        if self.expect(
            m.held_error(token),
            lambda: self.store.doubt_effect(
                self.key, token=token, worker=self.holders.get(token, "w1"), reason="late"
            ),
        ):
            m.expires, m.doubted = m.now, token  # the lease ends at once: in doubt

    @rule(stale=st.booleans())
    def fail(self, stale: bool) -> None:
        if not self.registered:
            return
        m = self.model
        token = m.token - 1 if stale and m.token > 1 else m.token
        error = m.held_error(token)
        if error is None and m.now >= m.deadline:  # a late failure is in doubt, not retried
            error = actae.DeadlinePassedError
        if self.expect(
            error,
            lambda: self.store.fail_effect(
                self.key,
                token=token,
                worker=self.holders.get(token, "w1"),
                error="boom",
                retry_after=RETRY_AFTER,
            ),
        ):
            retry_at = m.now + RETRY_AFTER
            exhausted = m.attempts >= POLICY.max_attempts or (
                retry_at - (m.first_claim or m.now) > POLICY.max_total
            )
            m.holder, m.in_doubt = None, False
            m.retry_at = None if exhausted else retry_at
            m.review = exhausted

    @rule(outcome=st.sampled_from(["completed", "failed"]), with_token=st.booleans())
    def reconcile(self, outcome: str, with_token: bool) -> None:
        if not self.registered:
            return
        m = self.model
        status = m.status()
        if m.before_deadline():
            error: type[Exception] | None = actae.DeadlineNotPassedError
        elif with_token:
            error = m.held_error(m.token)
        elif status is S.CLAIMED:
            error = actae.LeaseHeldError
        elif status not in (S.IN_DOUBT, S.NEEDS_REVIEW):
            error = actae.EffectBlockedError
        else:
            error = None
        token = m.token if with_token else None
        if self.expect(
            error,
            lambda: self.store.reconcile(
                self.key, outcome, actor="ops", token=token, result={"ok": True}
            ),
        ):
            if outcome == "completed":
                m.completed, m.holder = True, None
            elif not with_token:
                m.holder = None
            m.in_doubt = m.review = False

    @rule()
    def abandon(self) -> None:
        if not self.registered:
            return
        m = self.model
        error = actae.EffectBlockedError if m.status() in (S.COMPLETED, S.ABANDONED) else None
        if self.expect(error, lambda: self.store.abandon(self.key, actor="ops", reason="r")):
            m.abandoned, m.holder, m.in_doubt = True, None, False

    @rule(seconds=st.sampled_from([1.0, 4.0, LEASE + 1]))
    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)
        self.model.now += seconds

    @rule()
    def rebuild_read_models(self) -> None:
        """Rebuilt at the same moment, the read models equal the incremental ones."""
        projector = self.store.projector()
        projector.catch_up()
        incremental = projector.db.snapshot()
        projector.rebuild()
        assert projector.db.snapshot() == incremental

    @invariant()
    def store_agrees_with_model(self) -> None:
        if not self.registered:
            return
        m = self.model
        info = self.store.effect(self.key)
        assert info.status is m.status()
        assert (info.token, info.attempt, info.holder) == (m.token, m.attempts, m.holder)
        assert info.in_doubt == (m.in_doubt or m.status() is S.IN_DOUBT)
        expected_retry = None if m.retry_at is None else m.start + timedelta(seconds=m.retry_at)
        assert info.retry_at == expected_retry
        notes = [e for e in self.store.events(self.run.channel_id) if e.kind.startswith("effect.")]
        assert len(notes) == self.notes
        outstanding = [e.effect_key for e in self.store.recover(self.run.channel_id).outstanding]
        settled = m.status() in (S.COMPLETED, S.ABANDONED)
        assert outstanding == ([] if settled else [self.key])

    @invariant()
    def projections_agree_with_model(self) -> None:
        if not self.registered:
            return
        m = self.model
        projector = self.store.projector()
        projector.catch_up()
        (effect,) = [
            e for e in projector.query("SELECT * FROM effects") if e["effect_key"] == self.key
        ]
        status = m.status()
        view_status = "claimed" if status is S.IN_DOUBT else status.value
        assert (effect["status"], effect["token"], effect["attempts"]) == (
            view_status,
            m.token,
            m.attempts,
        )
        in_doubt = m.in_doubt or status is S.IN_DOUBT  # the lease ran out, on the store clock
        assert (effect["holder"], bool(effect["in_doubt"])) == (m.holder, in_doubt)
        assert bool(effect["claimed_in_doubt"]) == m.in_doubt
        (run,) = [
            r
            for r in projector.query("SELECT * FROM run_status")
            if str(r["run_id"]) == str(self.run.run_id)
        ]
        expected = {S.NEEDS_REVIEW: "blocked", S.RETRY_SCHEDULED: "retrying"}.get(status, "running")
        assert (run["status"], run["attempts"]) == (expected, m.attempts)
        action = {S.NEEDS_REVIEW: "review", S.RETRY_SCHEDULED: "retry"}.get(status)
        if action is None and in_doubt:
            action = "reconcile"
        expected_action = "continue" if action is None else f"{action} effect {self.key}"
        assert run["next_action"] == expected_action
        outstanding = [
            e
            for e in projector.query("SELECT effect_key FROM outstanding_effects")
            if e["effect_key"] == self.key
        ]
        assert len(outstanding) == (0 if status in (S.COMPLETED, S.ABANDONED) else 1)


def run_machine(url: str, examples: int) -> None:
    machine = type("Machine", (LedgerMachine,), {"url": url})
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=examples,
            stateful_step_count=20,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )


def test_memory_ledger_agrees_with_model() -> None:
    run_machine("memory://", 150)


def test_sqlite_ledger_agrees_with_model(tmp_path: Path) -> None:
    run_machine(f"sqlite:///{tmp_path / 'ledger.db'}", 30)


@pytest.mark.postgres
def test_postgres_ledger_agrees_with_model(pg_url: str) -> None:
    # Fewer sequences than on SQLite and memory, which explore the model; these hold the
    # PostgreSQL backend to the same model.
    run_machine(pg_url, 10)
