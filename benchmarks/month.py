"""The seed's month, scaled down: what 100,000 agent runs cost to write, keep and purge.

The model of one workflow (``workflow`` below), about 500 KB of data while it is active:

- a ~100 KB JSON state (80 KB of context that never changes, 20 KB of working notes that
  do), started and then moved on by ``STEPS`` transitions, each after a recorded model call
  (~2 KB of output and its token usage);
- a ~400 KB artifact put after the first step (``put_artifact``): half of them one of
  ``SHARED_POOL`` documents many runs fetch (the same PDF, the same web page), the rest unique;
- 15 % of the runs fail after their second step and are recovered: ``fail_run``, then
  ``retry_run``, then the re-run puts its artifact again (the same bytes) and goes on;
- every run completes, its result holding the artifact's reference.

The same workload (the same seeds) is written to two stores, with encryption at rest off and
on, by turns of ``TURN_RUNS`` runs from four client processes, alternating (this VM's speed
drifts): the store in clear is the baseline of the encrypted one. Then, for each: bytes per
table (``pg_total_relation_size``) as written and live (after ``VACUUM FULL``; autovacuum may
be off or behind), the runs aged past a retention policy with a :class:`actae.ManualClock`
and purged by ``apply_retention`` calls taking turns between the two stores, and the bytes
left (tombstones, read-model rows). Everything is measured at ``--runs`` runs per store and
extrapolated linearly to 100,000, except the purge's time: every ``apply_retention`` call
re-checks the runs purged within the last day, so its time is fitted over the calls and
added up for 100,000 runs in calls of 10,000 (``benchmarks.purge.Calls``).

What deduplicates: artifacts with the same bytes (across runs in clear, within a run when
encrypted: a sealed blob is named under its run's key) and documents above ``inline_max``.
A state below it stays in its event row whole, so its unchanged context is stored again with
every version.

Run with ``python -m benchmarks.month [--dsn DSN] [--runs N]``; the results go to
``benchmarks/results/month.json`` and the month table (for docs/performance.md) to stdout.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

import actae
from actae.adapters.custody.keyring import new_keyring, save_keyring
from benchmarks.common import (
    DSN,
    PERFORMANCE,
    drop_schemas,
    progress,
    save,
    stamp,
    update_readme,
    with_schema,
)
from benchmarks.core import in_processes
from benchmarks.documents import table_bytes, vacuum_full
from benchmarks.purge import DEFAULT_LIMIT, Calls

MONTH = 100_000
RUNS = 1_000
"""Runs per store (one in clear, one encrypted)."""
WORKERS = 4
TURN_RUNS = 100
"""Runs per turn (``WORKERS`` processes share them); the stores alternate turn by turn."""
STEPS = 3
CONTEXT, WORKING, OUTPUT = 80_000, 20_000, 2_000
"""Bytes of JSON: the state's stable context, its changing notes, a model call's output."""
ARTIFACT = 400_000
SHARED, SHARED_POOL = 0.5, 20
"""Share of the artifacts that are one of ``SHARED_POOL`` documents many runs put."""
FAILING = 0.15
LIMIT = 100
"""Runs per ``apply_retention`` call; the two stores take turns call by call."""
POLICY = {"completed": "7d", "failed": "30d", "cancelled": "7d"}
AGE = 31 * 86_400
VARIANTS = ("clear", "encrypted")
GROUPS = {
    "events": ("actae_events",),
    "artifacts": ("actae_artifacts", "actae_artifact_chunks", "actae_artifact_refs"),
}
"""Tables by what they hold; every other table (read models, keys, secrets): ``rest``."""


def shared_documents() -> list[bytes]:
    return [random.Random(f"shared-{i}").randbytes(ARTIFACT) for i in range(SHARED_POOL)]  # noqa: S311


def hex_text(rng: random.Random, size: int) -> str:
    return rng.randbytes(size // 2).hex()


def workflow(store: actae.Store, rng: random.Random, shared: list[bytes], name: str) -> None:
    """One run of the model above, its randomness drawn from ``rng``."""
    failing = rng.random() < FAILING
    context = hex_text(rng, CONTEXT)

    def state(step: int) -> dict[str, Any]:
        return {"context": context, "notes": hex_text(rng, WORKING), "step": step}

    run = store.start_run(name, agent_id="month", state=state(0))
    channel = run.channel_id
    version, cursor = run.state_version, run.cursor
    artifact = rng.choice(shared) if rng.random() < SHARED else rng.randbytes(ARTIFACT)
    ref = None
    for step in range(1, STEPS + 1):
        cursor = store.record(
            channel,
            kind="model.call",
            payload={"output": hex_text(rng, OUTPUT)},
            expected_cursor=cursor,
            usage={"input_tokens": 1_200, "output_tokens": 400},
        ).cursor
        receipt = store.transition(
            channel,
            kind="step",
            payload={"step": step},
            state=state(step),
            expected_version=version,
            expected_cursor=cursor,
        )
        version, cursor = receipt.state_version, receipt.cursor
        if step == 1:
            ref = store.put_artifact(run.run_id, artifact, media_type="application/pdf")
        if failing and step == 2:
            store.fail_run(run.run_id, "tool timed out", actor="worker")
            store.retry_run(run.run_id, actor="ops", reason="recovered")
            ref = store.put_artifact(run.run_id, artifact, media_type="application/pdf")
            head = store.head(channel)
            version, cursor = head.state_version, head.cursor
    assert ref is not None
    store.complete_run(run.run_id, {"report": ref.model_dump(mode="json")})


def logical_bytes() -> float:
    """Bytes one run hands the store, on average (states, outputs, artifacts put)."""
    state = CONTEXT + WORKING
    artifacts = ARTIFACT * (1 + FAILING)
    return state * (1 + STEPS) + OUTPUT * STEPS + artifacts


# -- writing, by turns --------------------------------------------------------------------------


def write_turn(url: str, turn: int, shared: list[bytes]) -> float:
    """``TURN_RUNS`` runs of turn ``turn`` from ``WORKERS`` processes; seconds taken."""
    share = TURN_RUNS // WORKERS

    def job(index: int, ready: Any, out: Any) -> None:
        rng = random.Random(f"turn-{turn}-{index}")  # noqa: S311 - the same runs in both stores
        with actae.open(url) as store:
            ready.wait()
            for i in range(share):
                workflow(store, rng, shared, f"month-{turn}-{index}-{i}")
            out.put([])

    per_s, _ = in_processes(job, WORKERS, share)
    return WORKERS * share / per_s


def grouped(sizes: dict[str, int]) -> dict[str, int]:
    """Bytes of ``table_bytes`` summed by ``GROUPS`` (and ``rest``), with their ``total``."""
    out = {group: sum(sizes.get(name, 0) for name in names) for group, names in GROUPS.items()}
    out["rest"] = sum(sizes.values()) - sum(out.values())
    out["total"] = sum(sizes.values())
    return out


def count_events(dsn: str, schema: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        table = sql.Identifier(schema, "actae_events")
        row = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(table)).fetchone()
    return int(row[0]) if row else 0


def measure(dsn: str, runs: int) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:8]
    schemas = {variant: f"bench_month_{tag}_{variant}" for variant in VARIANTS}
    with tempfile.TemporaryDirectory() as folder:
        keyring = Path(folder) / "keyring.json"
        save_keyring(new_keyring(), keyring, replace=False)
        urls = {variant: with_schema(dsn, schemas[variant]) for variant in VARIANTS}
        urls["encrypted"] += f"&keyring={keyring}"
        try:
            return measure_stores(dsn, schemas, urls, runs)
        finally:
            drop_schemas(dsn, *schemas.values())


def measure_stores(
    dsn: str, schemas: dict[str, str], urls: dict[str, str], runs: int
) -> dict[str, Any]:
    empty: dict[str, dict[str, int]] = {}
    for variant, url in urls.items():
        with actae.open(url) as store:  # closed again: no store is open while processes fork
            store.projector().catch_up()  # creates the read models' tables
        vacuum_full(dsn, schemas[variant])
        empty[variant] = grouped(table_bytes(dsn, schemas[variant]))
    shared = shared_documents()
    seconds = dict.fromkeys(VARIANTS, 0.0)
    turns = runs // TURN_RUNS
    for turn in range(turns):
        for variant in VARIANTS if turn % 2 == 0 else VARIANTS[::-1]:
            seconds[variant] += write_turn(urls[variant], turn, shared)
        if (turn + 1) % 5 == 0 or turn + 1 == turns:
            progress(f"written {(turn + 1) * TURN_RUNS:,} runs to each store")
    written = turns * TURN_RUNS
    out: dict[str, Any] = {
        variant: {"runs": written, "bytes_empty": empty[variant]} for variant in VARIANTS
    }
    for variant in VARIANTS:
        figures = out[variant]
        figures["write_s"] = seconds[variant]
        figures["events"] = count_events(dsn, schemas[variant])
    clock = actae.ManualClock()
    stores = {variant: actae.open(urls[variant], clock=clock) for variant in VARIANTS}
    try:
        for variant, store in stores.items():
            progress(f"{variant}: projecting; bytes as written, then live (VACUUM FULL)")
            started = time.perf_counter()
            store.projector().catch_up()
            out[variant]["catch_up_s"] = time.perf_counter() - started
            out[variant]["bytes_written"] = grouped(table_bytes(dsn, schemas[variant]))
            out[variant]["settled"] = vacuum_full(dsn, schemas[variant])
            out[variant]["bytes_live"] = grouped(table_bytes(dsn, schemas[variant]))
            store.set_retention(POLICY, actor="bench")
        clock.advance(AGE)
        progress(f"purging both stores, {LIMIT} runs per apply_retention call, by turns")
        calls = {variant: Calls() for variant in VARIANTS}
        left = set(VARIANTS)
        while left:
            for variant in sorted(left):
                if not calls[variant].call(stores[variant], LIMIT):
                    left.discard(variant)
        for variant in VARIANTS:
            out[variant]["purge"] = calls[variant].figures(MONTH, (DEFAULT_LIMIT,))
            out[variant]["settled"] &= vacuum_full(dsn, schemas[variant])
            out[variant]["bytes_after"] = grouped(table_bytes(dsn, schemas[variant]))
    finally:
        for store in stores.values():
            store.close()
    return out


# -- report -------------------------------------------------------------------------------------


def human(size: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if size >= scale:
            return f"{size / scale:,.1f} {unit}"
    return f"{size:,.0f} B"


def duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:,.1f} h"
    return f"{seconds / 60:,.1f} min" if seconds >= 60 else f"{seconds:,.1f} s"


def per_run(figures: dict[str, Any], moment: str, group: str = "total") -> float:
    """Bytes per run of ``group`` at ``moment``, beyond those of the empty store."""
    grown: float = figures[moment][group] - figures["bytes_empty"][group]
    return grown / float(figures["runs"])


def table(results: dict[str, Any]) -> str:
    """The month table: per run as measured, and the month of ``MONTH`` runs extrapolated."""
    clear, sealed = results["clear"], results["encrypted"]
    runs = clear["runs"]
    rows: list[tuple[str, str, str, str]] = []

    def add(
        measure: str,
        key: Callable[[dict[str, Any]], float],
        show: Callable[[float], str] = human,
    ) -> None:
        a, b = key(clear), key(sealed)
        rows.append((measure, show(a), show(b), f"{b / a:.2f}x" if a else "-"))

    def per_s(figures: dict[str, Any]) -> float:
        return float(figures["runs"] / figures["write_s"])

    add(f"runs written per second ({WORKERS} client processes)", per_s, "{:,.1f}".format)
    add(
        "events written per second",
        lambda f: f["events"] / f["write_s"],
        "{:,.0f}".format,
    )
    add("time to write the month", lambda f: MONTH / per_s(f), duration)
    for group, what in (
        ("events", "events"),
        ("artifacts", "artifacts"),
        ("rest", "the rest (read models, keys)"),
    ):
        add(f"stored per run: {what}", partial(per_run, moment="bytes_live", group=group))
    add("stored per run, all", lambda f: per_run(f, "bytes_live"))
    add(
        "on disk per run as written (dead rows before vacuum)",
        lambda f: per_run(f, "bytes_written"),
    )
    add("stored, the month", lambda f: per_run(f, "bytes_live") * MONTH)
    add(
        "purged runs per second (as measured)", lambda f: f["purge"]["runs_per_s"], "{:,.0f}".format
    )
    add(
        f"time to purge the month (calls of {DEFAULT_LIMIT:,} runs, fitted)",
        lambda f: f["purge"]["target_s"][str(DEFAULT_LIMIT)],
        duration,
    )
    add("left after retention, per run", lambda f: per_run(f, "bytes_after"))
    add("left after retention, the month", lambda f: per_run(f, "bytes_after") * MONTH)
    lines = [
        f"PostgreSQL 15, {results['machine']}, {results['date'][:10]}; measured at {runs:,} runs "
        f"per store, extrapolated to {MONTH:,} (linearly; the purge by a fit over its calls); "
        "command: `python -m benchmarks.month`. "
        f"Each run hands the store ~{human(logical_bytes())} (states, outputs, artifacts).",
        "",
        f"| the seed's month: {MONTH:,} starts, 15 % failed and recovered, ~500 KB per workflow "
        "| in clear | encrypted | encrypted ÷ clear |",
        "|---|---|---|---|",
        *(f"| {' | '.join(row)} |" for row in rows),
    ]
    if not (clear["settled"] and sealed["settled"]):
        lines += ["", "(A transaction open elsewhere kept deleted rows through VACUUM FULL.)"]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dsn", default=DSN)
    parser.add_argument("--runs", type=int, default=RUNS, help="runs per store")
    parser.add_argument(
        "--docs", action="store_true", help="also put the table in docs/performance.md"
    )
    args = parser.parse_args()
    runs = max(TURN_RUNS, args.runs - args.runs % TURN_RUNS)
    results: dict[str, Any] = {
        **stamp(),
        "model": {
            "steps": STEPS,
            "state_bytes": CONTEXT + WORKING,
            "stable_bytes": CONTEXT,
            "artifact_bytes": ARTIFACT,
            "shared": SHARED,
            "shared_pool": SHARED_POOL,
            "failing": FAILING,
            "logical_bytes_per_run": logical_bytes(),
        },
        **measure(args.dsn, runs),
    }
    save("month", results)
    print(f"\nActae month benchmark, {results['date']}, {results['machine']}\n")
    print(table(results))
    if args.docs:
        update_readme("month", table(results), PERFORMANCE)


if __name__ == "__main__":
    main()
