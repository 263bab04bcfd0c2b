"""The write-scaling targets, each figure with its ratio and, when missed, the measured reason.

``benchmarks.report`` puts this table at the top of README's benchmark block. A reason is
computed from the same run's results (the anatomy's rung-by-rung costs, CPU per write,
per-event costs), so it changes with the figures rather than going stale.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from functools import partial
from typing import Any

from benchmarks.anatomy import RUNGS

Row = tuple[str, str, str, str]
"""measure, figure (with its ratio), target, verdict (met, or missed and why)."""


def _verdict(ok: bool, why: Callable[[], str]) -> str:
    return "met" if ok else f"**missed**: {why()}"


RUNG_COSTS = {
    "event row": "the event row (table, indexes, unique operation id)",
    "positions": "the positions statement",
    "recorder": "the recorder (pool, errors, retry)",
    "integrity": "validation and checksums",
    "Actae": "the domain model",
}
"""What each anatomy rung adds, as a reason names it."""


def rung_costs(anatomy: dict[str, Any], processes: str) -> str:
    """The two rungs that cost the most points of raw, and the client CPU per transition."""
    rungs = anatomy["rungs"]
    base = rungs["raw"][processes]["per_s"]
    drops = []
    for (before, _), (name, _) in itertools.pairwise(RUNGS):
        points = (rungs[before][processes]["per_s"] - rungs[name][processes]["per_s"]) / base
        drops.append((points, name))
    worst = sorted(drops, reverse=True)[:2]
    parts = " and ".join(f"{RUNG_COSTS[name]} {points * 100:.0f} points" for points, name in worst)
    cpu = rungs["Actae"]["1"]["cpu_us"], rungs["raw"]["1"]["cpu_us"]
    return (
        f"client CPU: {cpu[0]:,.0f} µs per transition vs raw {cpu[1]:,.0f}; costliest rungs "
        f"of the anatomy ({'1 connection' if processes == '1' else '4 processes'}): {parts}"
    )


def table(results: dict[str, dict[str, Any]]) -> str:
    """The targets of issue 18 as a markdown table (``results``: each benchmark's JSON)."""
    core, ledger, proj = results["core"], results["ledger"], results["projections"]
    peers, anatomy, scaling = results["peers"], results["anatomy"], results["scaling"]
    rows: list[Row] = []
    ours, raw = core["postgresql"]["transitions"], core["postgresql"]["raw"]
    for processes, goal, who in (("1", 0.85, "1 connection"), ("4", 0.70, "4 processes")):
        ratio = ours[processes]["per_s"] / raw[processes]["per_s"]
        rows.append(
            (
                f"transitions, {who}",
                f"{ours[processes]['per_s']:,.0f}/s, {ratio:.0%} of raw",
                f"≥ {goal:.0%} of raw",
                _verdict(ratio >= goal, partial(rung_costs, anatomy, processes)),
            )
        )
    medians = scaling["medians"]
    eight, one = medians["8"], medians["1"]
    flushes = eight["actae"]["flushes_per_commit"], eight["raw"]["flushes_per_commit"]
    cpu = eight["actae"]["machine_cpu_us"], eight["raw"]["machine_cpu_us"]

    def busy() -> str:
        return (
            f"the 2 cores are saturated: machine CPU {cpu[0]:,.0f} µs per write vs raw "
            f"{cpu[1]:,.0f}, so fewer commits are in flight together to share a flush"
        )

    rows.append(
        (
            "WAL flushes per commit, 8 writers",
            f"{flushes[0]:.2f} (raw {flushes[1]:.2f})",
            "≤ raw + 0.15",
            _verdict(flushes[0] <= flushes[1] + 0.15, busy),
        )
    )
    scale = medians["scaling"]
    rows.append(
        (
            "8 writers ÷ 1 writer",
            f"{scale['actae']:.2f}x (raw {scale['raw']:.2f}x); "
            f"{eight['actae_of_raw']:.0%} / {one['actae_of_raw']:.0%} of raw",
            "≥ raw's - 0.1",
            _verdict(scale["actae"] >= scale["raw"] - 0.1, busy),
        )
    )
    live = proj["postgresql"]["live"]
    lag, raw_lag = live["projection_lag_ms"]["p99"], proj["postgresql"]["raw_live"]
    rows.append(
        (
            f"live projection lag p99 at {live['write_rate']:,.0f} transitions/s",
            f"{lag:.1f} ms (raw {raw_lag['projection_lag_ms']['p99']:.1f} ms)",
            "≤ 20 ms",
            _verdict(lag <= 20, lambda: "see benchmarks.projections"),
        )
    )
    catch, raw_catch = (
        proj["postgresql"]["catch_up_per_s"],
        proj["postgresql"]["raw_catch_up_per_s"],
    )
    rows.append(
        (
            "projection catch-up",
            f"{catch:,.0f} events/s, {catch / raw_catch:.0%} of raw",
            "≥ 50,000 events/s",
            _verdict(
                catch >= 50_000,
                lambda: (
                    f"{1e6 / catch:.1f} µs per event vs raw's read {1e6 / raw_catch:.1f}: "
                    "the projector decodes each event and upserts its read-model rows"
                ),
            ),
        )
    )
    claims = ledger["claim"]
    claim_ratio = claims["ratio"]
    rows.append(
        (
            "ledger claims, 4 worker processes",
            f"{claims['actae_per_s']:,.0f}/s, {claim_ratio:.0%} of raw",
            "≥ 70% of raw",
            _verdict(
                claim_ratio >= 0.70,
                lambda: (
                    f"{1e6 / claims['actae_per_s']:,.0f} µs per claim vs raw "
                    f"{1e6 / claims['raw_per_s']:,.0f}: a claim writes 3 rows (the effect, its"
                    " claim, the channel's note) where raw upserts 1"
                ),
            ),
        )
    )
    steps = peers["peers"]
    put = steps.get("LangGraph PostgresSaver.put", {})
    if "per_s" in put:
        versus = steps["Actae transition"]["per_s"] / put["per_s"]
        rows.append(
            (
                "vs LangGraph PostgresSaver.put",
                f"{versus:.2f}x ({steps['Actae transition']['per_s']:,.0f} vs "
                f"{put['per_s']:,.0f} steps/s)",
                "≥ 1.25x",
                _verdict(
                    versus >= 1.25,
                    lambda: (
                        "put writes one row and keeps no history, operation record or "
                        "checksums; " + rung_costs(anatomy, "1")
                    ),
                ),
            )
        )
    lines = [
        "| target (issue 18) | measured | target | verdict |",
        "|---|---|---|---|",
        *(f"| {' | '.join(row)} |" for row in rows),
    ]
    return "\n".join(lines)
