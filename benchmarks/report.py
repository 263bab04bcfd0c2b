"""One summary of every benchmark, with the targets of docs/performance.md beside the figures.

``make bench`` runs the benchmarks and the house measures (each writes
``benchmarks/results/<name>.json`` and prints its full tables), then this module, which
prints the summary and writes it to ``benchmarks/results/summary.md``. ``python -m
benchmarks.report --readme`` also replaces the block between the ``bench:start``/``bench:end``
markers in README.md with it. The block names the run's date; results files written more
than ``ONE_RUN`` apart are named with their dates, because the targets table is meant to be
one run's.
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime, timedelta
from typing import Any

from benchmarks.anatomy import table as anatomy_table
from benchmarks.common import QUICK_RUN, RESULTS, update_readme
from benchmarks.house import table as house_table
from benchmarks.instructions import table as instructions_table
from benchmarks.peers import table as peers_table
from benchmarks.scaling import table as scaling_table
from benchmarks.targets import table as targets_table


def load(name: str) -> dict[str, Any]:
    path = RESULTS / f"{name}.json"
    if not path.exists():
        raise SystemExit(f"{path} is missing: run `make bench` first")
    data: dict[str, Any] = json.loads(path.read_text())
    return data


BENCHMARKS = (
    "core",
    "ledger",
    "projections",
    "peers",
    "anatomy",
    "concurrency",
    "scaling",
    "instructions",
    "house",
)
ONE_RUN = timedelta(hours=3)
"""How far apart one ``make bench``'s results files can be written (it takes under one)."""


def provenance(results: dict[str, dict[str, Any]]) -> str:
    """Empty when every results file is one run's; else each file's date, as a warning."""
    dates = {name: datetime.fromisoformat(data["date"]) for name, data in results.items()}
    if max(dates.values()) - min(dates.values()) <= ONE_RUN:
        return ""
    return "Not one run: the results files were written at " + ", ".join(
        f"{name} {date:%Y-%m-%d %H:%M}" for name, date in dates.items()
    )


def verdict(ok: bool) -> str:
    return "met" if ok else "**missed**"


def summary() -> str:
    everything = {name: load(name) for name in BENCHMARKS}
    core, ledger, proj, peers = (everything[name] for name in BENCHMARKS[:4])
    anatomy, concurrency, scaling, instructions, house = (everything[n] for n in BENCHMARKS[4:])
    pg = core["postgresql"]
    ours, raw = pg["transitions"], pg["raw"]
    sizes = [str(size) for size in core["sizes"]]
    rows: list[tuple[str, str, str, str, str]] = []

    def add(measure: str, actae: str, baseline: str, ratio: str, target: str) -> None:
        rows.append((measure, actae, baseline, ratio, target))

    for workers, who in (("1", "1 connection"), ("4", "4 client processes")):
        a, r = ours[workers]["per_s"], raw[workers]["per_s"]
        add(f"transitions/s, ~2 KB state, {who}", f"{a:,.0f}", f"{r:,.0f}", f"{a / r:.0%}", "")
    add(
        "transition p50 / p99 ms, 1 connection",
        f"{ours['latency']['p50_ms']:.2f} / {ours['latency']['p99_ms']:.2f}",
        f"{raw['latency']['p50_ms']:.2f} / {raw['latency']['p99_ms']:.2f}",
        f"{ours['latency']['p50_ms'] / raw['latency']['p50_ms']:.2f}x",
        "",
    )
    many, raw_many = ours["4"]["latency"], raw["4"]["latency"]
    add(
        "transition p50 / p99 ms, 4 client processes",
        f"{many['p50_ms']:.2f} / {many['p99_ms']:.2f}",
        f"{raw_many['p50_ms']:.2f} / {raw_many['p99_ms']:.2f}",
        f"{many['p50_ms'] / raw_many['p50_ms']:.2f}x",
        "",
    )
    add(
        "client CPU µs per transition",
        f"{ours['cpu_us']:,.0f}",
        f"{raw['cpu_us']:,.0f}",
        f"{ours['cpu_us'] / raw['cpu_us']:.2f}x",
        "",
    )
    add(
        "bytes on disk per transition",
        f"{ours['bytes_per_transition']:,.0f}",
        f"{raw['bytes_per_transition']:,.0f}",
        f"{ours['bytes_per_transition'] / raw['bytes_per_transition']:.2f}x",
        "",
    )
    for measure in ("state_at_middle", "recover"):
        values = [pg["reads"][size][measure]["p50_ms"] for size in sizes]
        base = pg["raw_reads"][sizes[-1]][measure]["p50_ms"]
        flat = max(values) <= 1.5 * min(values)
        add(
            f"{measure} p50 ms at {' / '.join(f'{int(s):,}' for s in sizes)} events",
            " / ".join(f"{v:.2f}" for v in values),
            f"{base:.2f}",
            f"{values[-1] / base:.2f}x",
            f"flat, ≤ 2.5x: {verdict(flat and values[-1] / base <= 2.5)}",
        )
    lite = core.get("sqlite", {})
    for measure in ("state_at_middle", "recover") if "raw_reads" in lite else ():
        values = [lite["reads"][size][measure]["p50_ms"] for size in sizes]
        base = lite["raw_reads"][sizes[-1]][measure]["p50_ms"]
        add(
            f"SQLite {measure} p50 ms (raw: sqlite3)",
            " / ".join(f"{v:.3f}" for v in values),
            f"{base:.3f}",
            f"{values[-1] / base:.1f}x",
            "",
        )
    catch, raw_catch = (
        proj["postgresql"]["catch_up_per_s"],
        proj["postgresql"]["raw_catch_up_per_s"],
    )
    add(
        "projection catch-up, events/s",
        f"{catch:,.0f}",
        f"{raw_catch:,.0f}",
        f"{catch / raw_catch:.0%}",
        "",
    )
    live, raw_live = proj["postgresql"]["live"], proj["postgresql"]["raw_live"]
    for name, key in (("projection", "projection_lag_ms"), ("subscription", "subscription_lag_ms")):
        a, r = live[key]["p99"], raw_live[key]["p99"]
        add(
            f"live {name} lag p99 ms at {live['write_rate']:,.0f} transitions/s, "
            "the follower in another process",
            f"{a:.1f}",
            f"{r:.1f}",
            f"{a / r:.1f}x",
            "",
        )
    foreign = proj["postgresql"]["foreign"]["subscription_lag_ms"]
    add(
        f"subscription lag p50 / p99 ms at {live['write_rate']:,.0f} transitions/s, "
        "foreign transactions open",
        f"{foreign['p50']:.1f} / {foreign['p99']:.1f}",
        "",
        "",
        "",
    )
    complete = live["gaps_or_reorders"] == 0 and live["delivered"] == live["samples"]
    add(
        "subscription, 4 writers: delivered, gaps or reorders",
        f"{live['delivered']:,} of {live['samples']:,}, {live['gaps_or_reorders']}",
        f"{raw_live['delivered']:,} of {raw_live['samples']:,}",
        "",
        f"zero gaps: {verdict(complete)}",
    )
    for label in ("claim", "claim+complete"):
        a, r = ledger[label]["actae_per_s"], ledger[label]["raw_per_s"]
        ratio = ledger[label]["ratio"]  # the median of each round's ratio, as in the targets
        add(f"ledger {label}/s, 4 processes", f"{a:,.0f}", f"{r:,.0f}", f"{ratio:.0%}", "")
    graph = concurrency["langgraph"]
    for what, measure in (
        ("superstep", "LangGraph supersteps/s (aput_writes + aput), AsyncActaeSaver"),
        ("ainvoke", "LangGraph ainvoke/s, one-node graph, fresh threads, AsyncActaeSaver"),
    ):
        a = graph[f"{what}, AsyncActaeSaver"]["per_s"]
        r = graph[f"{what}, AsyncPostgresSaver"]["per_s"]
        add(
            f"{measure} (baseline: AsyncPostgresSaver)",
            f"{a:,.0f}",
            f"{r:,.0f}",
            f"{a / r:.2f}x",
            "",
        )
    moves = concurrency["transitions"]
    coroutines, threads = concurrency["coroutines"], concurrency["threads"]
    aio, threaded = (
        moves[f"AsyncStore, {coroutines} coroutines"],
        moves[f"Store, {threads} threads"],
    )
    raw_aio, raw_threaded = (
        moves[f"raw async, {coroutines} coroutines"],
        moves[f"raw, {threads} threads"],
    )
    add(
        f"transitions/s, AsyncStore, {coroutines} coroutines (raw: AsyncConnectionPool)",
        f"{aio['per_s']:,.0f}",
        f"{raw_aio['per_s']:,.0f}",
        f"{aio['per_s'] / raw_aio['per_s']:.0%}",
        "",
    )
    add(
        f"transitions/s, Store, {threads} threads of one process (raw: a connection each)",
        f"{threaded['per_s']:,.0f}",
        f"{raw_threaded['per_s']:,.0f}",
        f"{threaded['per_s'] / raw_threaded['per_s']:.0%}",
        "",
    )
    add(
        f"transitions/s, {coroutines} coroutines ÷ {threads} threads",
        f"{aio['per_s'] / threaded['per_s']:.2f}x",
        f"{raw_aio['per_s'] / raw_threaded['per_s']:.2f}x",
        "",
        "",
    )
    warning = provenance(everything)
    quick = "QUICK RUN (`ACTAE_BENCH_QUICK=1`): small counts, the figures mean nothing. "
    lines = [
        f"{quick if QUICK_RUN else ''}PostgreSQL 15, {core['machine']}, {core['date'][:10]}; "
        "command: `make bench`.",
        *(["", f"**{warning}.**"] if warning else []),
        "",
        targets_table(everything),
        "",
        "The house measures (`python -m benchmarks.house`): lines, import graph, and the library "
        "files one transition passes through before its INSERT.",
        "",
        house_table(house),
        "",
        "Client instructions per operation, counted by callgrind (`python -m "
        f"benchmarks.instructions`, {instructions['date'][:10]}): the one figure this VM's "
        "load cannot blur.",
        "",
        instructions_table(instructions),
        "",
        scaling_table(scaling),
        "",
        "| measure | Actae | baseline: raw psycopg (or sqlite3) unless named | ratio "
        "| target ([docs/performance.md](docs/performance.md)) |",
        "|---|---|---|---|---|",
        *(f"| {' | '.join(row)} |" for row in rows),
        "",
        peers_table(peers),
        "",
        f"Where a transition's time goes (`python -m benchmarks.anatomy`, {anatomy['date'][:10]}),"
        " from the raw insert to Actae, one part added per rung:",
        "",
        anatomy_table(anatomy),
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--readme", action="store_true", help="also update README.md")
    args = parser.parse_args()
    text = summary()
    (RESULTS / "summary.md").write_text(text + "\n")
    print("\nActae benchmark summary\n")
    print(text)
    if args.readme:
        if QUICK_RUN:
            raise SystemExit("a quick run's figures do not go into README.md")
        update_readme("bench", text)


if __name__ == "__main__":
    main()
