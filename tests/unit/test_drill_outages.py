"""The drill's outage plan: one or two outages per run, the first before the takeover goes on."""

from __future__ import annotations

from actae.adapters.drill.outages import MOMENTS, plan


def test_every_run_has_an_outage_the_takeover_must_ride_out() -> None:
    plans = [plan(seed, index) for seed in range(200) for index in range(5)]

    assert all(1 <= len(moments) <= 2 for moments in plans)
    assert all(moments[0] in ("before-kill", "after-kill") for moments in plans)
    assert all(list(moments) == sorted(moments, key=MOMENTS.index) for moments in plans)
    assert {m for moments in plans for m in moments} == set(MOMENTS)
    assert {len(moments) for moments in plans} == {1, 2}


def test_the_seed_decides_the_plan() -> None:
    assert plan(7, 0) == plan(7, 0)
    assert len({plan(seed, 0) for seed in range(50)}) > 1
