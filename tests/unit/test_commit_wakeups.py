"""A reader that looked, found nothing and then waits is woken by what was committed meanwhile."""

from __future__ import annotations

import threading
import time

import pytest

import actae
from actae.adapters.readside.subscription import Commits, ConditionWaiter, Waiter

LONG = 30.0
"""A wait no test should ever sit out: returning well before it is the assertion."""


def test_a_commit_between_the_look_and_the_wait_ends_the_wait_at_once() -> None:
    commits = Commits()
    waiter = ConditionWaiter(commits)
    commits.committed()  # after the reader's (empty) look, before it waits
    started = time.monotonic()
    waiter.wait(LONG)
    assert time.monotonic() - started < 1.0


def test_a_wait_with_nothing_committed_sleeps_its_timeout() -> None:
    waiter = ConditionWaiter(Commits())
    started = time.monotonic()
    waiter.wait(0.05)
    assert time.monotonic() - started >= 0.05


def test_a_commit_during_the_wait_ends_it() -> None:
    commits = Commits()
    waiter = ConditionWaiter(commits)
    waiting = threading.Event()
    done = threading.Event()

    def wait() -> None:
        waiting.set()
        waiter.wait(LONG)
        done.set()

    thread = threading.Thread(target=wait)
    thread.start()
    assert waiting.wait(5)
    commits.committed()
    assert done.wait(5)
    thread.join()


class Idle(Waiter):
    """A waiter that sits out any wait until woken: the projector's longest idle poll."""

    def __init__(self) -> None:
        self.waiting = threading.Event()
        self.woken = threading.Event()

    def wait(self, timeout: float) -> None:
        self.waiting.set()
        self.woken.wait(LONG)

    def wake(self) -> None:
        self.woken.set()


def test_stopping_an_idle_projector_wakes_it() -> None:
    with actae.open("memory://") as store:
        projector = store.projector()
        idle = Idle()
        projector._new_waiter = lambda: idle  # its idle wait, made as long as a test allows
        projector.start()
        assert idle.waiting.wait(10)
        started = time.monotonic()
        projector.stop()
        assert time.monotonic() - started < 5.0


def test_a_subscription_that_would_spin_is_refused() -> None:
    with actae.open("memory://") as store:
        for bad in (0, -1.0, "0.1"):
            with pytest.raises(actae.ValidationError) as refused:
                store.subscribe(poll_interval=bad)  # type: ignore[arg-type]
            assert refused.value.field == "poll_interval"
