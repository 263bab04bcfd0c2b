"""Issue 29's targets, each figure with its ratio and, when missed, the measured reason.

``benchmarks.report`` puts this table at the top of README's benchmark block. Every row is
read from the results of one ``make bench`` (``benchmarks/results/*.json``), and a reason
is computed from the same results (the anatomy's rung-by-rung costs, CPU and instructions
per operation, the files a transition passes through), so it changes with the figures
rather than going stale.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from functools import partial
from typing import Any

from benchmarks.anatomy import RUNGS
from benchmarks.common import WARM_UP
from benchmarks.house import UNSEEN

Row = tuple[str, str, str, str]
"""measure, figure (with its ratio), target, verdict (met, or missed and why)."""

Results = dict[str, dict[str, Any]]
"""Each benchmark's JSON, by name (``core``, ``ledger``, …)."""

LIVE_LAG_MS, FOREIGN_LAG_MS = 20, 250
CATCH_UP_PER_S = 60_000
SHIPPED_LINES = 24_000
DUPLICATE_PAIRS = 12
TRANSITION_FILES = 6
INSTRUCTIONS_RATIO = 1.5


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


def instruction_rows(results: Results) -> list[Row]:
    """Client instructions per transition (the target), per claim and per caught-up event."""
    counted, house = results["instructions"], results["house"]
    rows: list[Row] = []
    for name, what in (
        ("transition", "transition (~2 KB state)"),
        ("claim", "claim"),
        ("catch-up", "caught-up event (batches of 2,000)"),
    ):
        measure = f"client instructions per {what}, Actae ÷ raw (callgrind)"
        if name not in counted:
            rows.append((measure, "not measured", "", ""))
            continue
        row = counted[name]
        figure = f"{row['ratio']:.2f} ({row['actae']:,.0f} vs {row['raw']:,.0f})"
        if name != "transition":
            rows.append((measure, figure, "reported", ""))
            continue
        files = len(house["transition_files"].get("entered", []))

        def why(row: dict[str, Any] = row, files: int = files) -> str:
            through = f", through {files} library files before the INSERT" if files else ""
            return (
                f"{row['actae'] - row['raw']:,.0f} instructions more than raw's INSERT"
                f"{through}; " + rung_costs(results["anatomy"], "1")
            )

        ok = row["ratio"] <= INSTRUCTIONS_RATIO
        rows.append((measure, figure, f"≤ {INSTRUCTIONS_RATIO}", _verdict(ok, why)))
    return rows


def write_rows(results: Results) -> list[Row]:
    """Transitions on 1 connection and 4 processes, scaling to 8 writers, their flushes."""
    core, anatomy, scaling = results["core"], results["anatomy"], results["scaling"]
    rows: list[Row] = []
    ours, raw = core["postgresql"]["transitions"], core["postgresql"]["raw"]
    for processes, goal, who in (
        ("1", 0.85, "1 connection (interleaved)"),
        ("4", 0.75, "4 processes"),
    ):
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
            f"machine CPU {cpu[0]:,.0f} µs per write vs raw {cpu[1]:,.0f} on "
            f"{results['core']['machine'].split(', ')[1]}: fewer commits are in flight "
            "together to share a flush"
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
    rows.append(
        (
            "WAL flushes per commit, 8 writers",
            f"{flushes[0]:.2f} (raw {flushes[1]:.2f})",
            "≤ raw + 0.15",
            _verdict(flushes[0] <= flushes[1] + 0.15, busy),
        )
    )
    return rows


def read_rows(results: Results) -> list[Row]:
    """Claims, catch-up, live lag and lag with a foreign transaction open."""
    ledger, proj, counted = results["ledger"], results["projections"], results["instructions"]
    rows: list[Row] = []

    def instructions(name: str, what: str) -> str:
        if name not in counted:
            return ""
        row = counted[name]
        return f"; {row['actae']:,.0f} client instructions per {what} vs raw {row['raw']:,.0f}"

    claims = ledger["claim"]
    rows.append(
        (
            "claims, 4 worker processes",
            f"{claims['actae_per_s']:,.0f}/s, {claims['ratio']:.0%} of raw",
            "≥ 70% of raw",
            _verdict(
                claims["ratio"] >= 0.70,
                lambda: (
                    f"{1e6 / claims['actae_per_s']:,.0f} µs per claim vs raw "
                    f"{1e6 / claims['raw_per_s']:,.0f}" + instructions("claim", "claim")
                ),
            ),
        )
    )
    pg = proj["postgresql"]
    catch, raw_catch = pg["catch_up_per_s"], pg["raw_catch_up_per_s"]
    rows.append(
        (
            "catch-up",
            f"{catch:,.0f} events/s, {catch / raw_catch:.0%} of raw",
            f"≥ {CATCH_UP_PER_S:,} events/s",
            _verdict(
                catch >= CATCH_UP_PER_S,
                lambda: (
                    f"{1e6 / catch:.1f} µs per event vs raw's {1e6 / raw_catch:.1f}"
                    + instructions("catch-up", "event")
                ),
            ),
        )
    )
    live, raw_live = pg["live"], pg["raw_live"]
    lags = live["projection_lag_ms"]["p99"], live["subscription_lag_ms"]["p99"]
    raw_lags = raw_live["projection_lag_ms"]["p99"], raw_live["subscription_lag_ms"]["p99"]
    rows.append(
        (
            f"live lag p99 at {live['write_rate']:,.0f} transitions/s: projector / subscriber, "
            f"each in a process of its own (after {WARM_UP:g} s at the rate)",
            f"{lags[0]:.1f} / {lags[1]:.1f} ms (raw {raw_lags[0]:.1f} / {raw_lags[1]:.1f} ms); "
            f"the first event after idle {live['projection_lag_ms'].get('first', math.nan):.0f} / "
            f"{live['subscription_lag_ms'].get('first', math.nan):.0f} ms (a poll after idle "
            "waits up to 1 s / 0.1 s)",
            f"≤ {LIVE_LAG_MS} ms",
            _verdict(
                max(lags) <= LIVE_LAG_MS,
                lambda: (
                    f"p50 {live['projection_lag_ms']['p50']:.1f} / "
                    f"{live['subscription_lag_ms']['p50']:.1f} ms; the writers reached "
                    f"{live['write_rate']:,.0f} of {live['asked_rate']:,.0f}/s asked, raw's "
                    f"LISTEN follower in the same run {raw_lags[1]:.1f} ms at p99"
                ),
            ),
        )
    )
    foreign = pg["foreign"]
    lag = foreign["subscription_lag_ms"]
    rows.append(
        (
            "subscription lag p99 with a foreign transaction open",
            f"{lag['p99']:.1f} ms, {foreign['delivered']:,} of {foreign['samples']:,} delivered",
            f"≤ {FOREIGN_LAG_MS} ms",
            _verdict(
                lag["p99"] <= FOREIGN_LAG_MS,
                lambda: (
                    f"p50 {lag['p50']:.1f} ms at {foreign['write_rate']:,.0f} transitions/s; "
                    f"without the transaction p99 {lags[1]:.1f} ms"
                ),
            ),
        )
    )
    return rows


def house_rows(house: dict[str, Any]) -> list[Row]:
    """Shipped lines, duplicates, circles and upward arrows, files a transition passes."""
    rows: list[Row] = []
    lines = house["lines"]
    total = sum(lines.values())
    rows.append(
        (
            "shipped library lines (actae/, domain/, projections/, adapters/)",
            f"{total:,}",
            f"≤ {SHIPPED_LINES:,}",
            _verdict(
                total <= SHIPPED_LINES,
                lambda: (
                    f"{total - SHIPPED_LINES:,} over: "
                    + ", ".join(f"{folder}/ {n:,}" for folder, n in lines.items())
                ),
            ),
        )
    )
    dups, groups, arrows = house["duplicates"], house["circles"], house["upward"]
    pairs = "not measured (needs the duplicates tool)" if dups is None else str(dups["pairs"])
    ok = (dups is None or dups["pairs"] <= DUPLICATE_PAIRS) and not groups and not arrows

    def why() -> str:
        parts = []
        if dups is not None and dups["pairs"] > DUPLICATE_PAIRS:
            parts.append(f"{dups['pairs']} pairs, the most shared {dups['rows'][0]}")
        parts += [f"circle {' ↔ '.join(m.rsplit('.', 1)[-1] for m in g)}" for g in groups]
        parts += [f"upward {arrow}" for arrow in arrows]
        return "; ".join(parts)

    rows.append(
        (
            "non-boilerplate duplicate pairs / import circles / upward arrows",
            f"{pairs} / {len(groups)} / {len(arrows)}",
            f"≤ {DUPLICATE_PAIRS} / 0 / 0",
            _verdict(ok, why),
        )
    )
    files = house["transition_files"]
    measure, goal = "files from Store.transition to its SQL", f"≤ {TRANSITION_FILES}"
    if not files:
        rows.append((measure, UNSEEN, goal, ""))
        return rows
    entered = files["entered"]
    rows.append(
        (
            measure,
            f"{len(entered)} ({len(files['on_stack'])} on the stack)",
            goal,
            _verdict(len(entered) <= TRANSITION_FILES, lambda: ", ".join(entered)),
        )
    )
    return rows


def table(results: Results) -> str:
    """The targets of issue 29 as a markdown table (``results``: each benchmark's JSON)."""
    rows = [
        *instruction_rows(results),
        *write_rows(results),
        *read_rows(results),
        *house_rows(results["house"]),
    ]
    lines = [
        "| target (issue 29) | measured | target | verdict |",
        "|---|---|---|---|",
        *(f"| {' | '.join(row)} |" for row in rows),
    ]
    return "\n".join(lines)
