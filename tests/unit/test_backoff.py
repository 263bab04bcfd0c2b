"""A reader's waits: short while events flow, growing to its poll interval when idle."""

from __future__ import annotations

from actae.adapters.readside.subscription import FIRST_WAIT, Backoff


def test_waits_double_after_each_empty_look_up_to_the_poll_interval() -> None:
    backoff = Backoff(0.1)
    waits = [backoff.wait() for _ in range(10)]
    assert waits[:3] == [FIRST_WAIT, 2 * FIRST_WAIT, 4 * FIRST_WAIT]
    assert waits == sorted(waits)
    assert waits[-1] == 0.1


def test_an_event_makes_the_next_wait_short_again() -> None:
    backoff = Backoff(1.0)
    for _ in range(20):
        backoff.wait()
    backoff.arrived()
    assert backoff.wait() == FIRST_WAIT


def test_a_poll_interval_below_the_first_wait_is_kept() -> None:
    backoff = Backoff(0.0005)
    assert [backoff.wait(), backoff.wait()] == [0.0005, 0.0005]
