"""The retry policy's backoff: exponential from ``initial_delay``, capped, with full jitter."""

from __future__ import annotations

import pytest

from actae.domain.effects import RetryPolicy


@pytest.mark.parametrize(
    ("attempt", "draw", "delay"),
    [
        (1, 1.0, 30.0),  # after the first failure: up to initial_delay
        (2, 1.0, 60.0),  # then twice as long each time
        (3, 0.5, 60.0),  # full jitter: a fraction of the ceiling
        (4, 1.0, 240.0),
        (5, 1.0, 300.0),  # 480 s capped at max_delay
        (9, 0.25, 75.0),  # the cap applies before the jitter
        (1, 0.0, 0.0),
    ],
)
def test_backoff_doubles_from_the_initial_delay_up_to_the_cap(
    attempt: int, draw: float, delay: float
) -> None:
    assert RetryPolicy().backoff(attempt, draw) == delay


def test_the_defaults_are_five_attempts_over_ten_minutes() -> None:
    policy = RetryPolicy()

    assert (policy.max_attempts, policy.initial_delay, policy.max_delay, policy.max_total) == (
        5,
        30.0,
        300.0,
        600.0,
    )
