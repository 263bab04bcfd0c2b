"""Anatomy of a transition: what each part of Actae's write costs, one rung at a time.

The core benchmark compares a whole Actae transition with the raw baseline (one ``INSERT`` of
one row). This one climbs from that baseline to the full transition, adding one of Actae's
parts per rung. Each rung is a complete write, measured on 1 connection (all rungs open at
once, taking turns of 100 writes, so a drifting machine treats them alike) and in 4 client
processes (three rounds, medians):

1. **raw**: the raw baseline of ``benchmarks.raw`` (one row, a unique operation id).
2. **+ event row**: the event row in Actae's stored-events table (global position, primary
   key per aggregate, the operation id in its uniquely indexed column: the row is the
   command's operation record too), one plain ``INSERT``.
3. **+ positions**: the recorder's own statement: the write's block of positions drawn
   from the table's sequence (``adapters/persistence/positions.py``; no lock is held across
   commit and nothing is notified inside the write).
4. **+ recorder**: the same row through ``ActaePostgresRecorder.insert_events``
   (pool checkout, error translation, retry on a dropped connection).
5. **+ integrity**: input validation, canonical JSON and SHA-256 checksums of payload and
   state, the command's fingerprint.
6. **Actae transition**: ``Store.transition``, adding the domain model (argument checks,
   head memory, pydantic events, mapper, receipts).

Rows 2 to 5 write bytes shaped like Actae's events (same fields, same sizes). Besides rate and
client CPU, the 4-process columns give the whole machine's CPU per transition (client and
server, from ``/proc/stat``): with 2 cores the processes are CPU-bound, so the rate follows it.

Run with ``python -m benchmarks.anatomy [--dsn DSN]`` (part of ``make bench``); results go
to ``benchmarks/results/anatomy.json``.
"""

from __future__ import annotations

import argparse
import math
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, cast

import orjson
import psycopg
from eventsourcing.persistence import StoredEvent
from psycopg import sql

import actae
from actae.adapters.persistence.operation_ids import StoredRecord, operation_id_of
from actae.adapters.persistence.postgres import ActaePostgresRecorder
from actae.domain.validation import fingerprint, require_document, require_json
from benchmarks.common import (
    DSN,
    QUICK_RUN,
    STATE,
    drop_schemas,
    medians,
    progress,
    save,
    timings_ms,
    with_schema,
)
from benchmarks.core import Turns, actae_transitions, in_processes
from benchmarks.raw import RawBaseline

TURN, TURNS, WORKERS, PER_WORKER, ROUNDS = (20, 2, 4, 30, 1) if QUICK_RUN else (100, 8, 4, 300, 3)
EVENT_TOPIC = "Channel.Transitioned"
NO_CHECKSUM = "sha256:" + "0" * 64  # same length as a real one, for rungs that skip integrity
PROC_STAT = Path("/proc/stat")

Writer = Callable[[int], list[float]]
"""Writes ``count`` transitions on a fresh channel; returns their latencies in ms."""


# -- the rows Actae writes ------------------------------------------------------------------


def event_rows(
    channel: uuid.UUID, n: int, checksums: tuple[str, str] | None = None
) -> list[StoredEvent]:
    """The event of transition ``n`` (its operation record too), encoded as Actae encodes it.

    Transition ``n`` is version ``n`` of the channel, so that each has its predecessor
    (the recorder refuses a version whose predecessor it does not hold).
    """
    state_sum, content = checksums or (NO_CHECKSUM, NO_CHECKSUM)
    operation_id = f"{channel}:{n}"
    event = transition_body(channel, n, operation_id, state_sum, content)
    return [StoredRecord(channel, n, EVENT_TOPIC, orjson.dumps(event), operation_id)]


def transition_body(
    channel: uuid.UUID, n: int, operation_id: str, state_checksum: str, fingerprint: str
) -> dict[str, Any]:
    """The fields of transition ``n``'s channel event, as Actae's encoder orders them."""
    return {
        "timestamp": datetime.now(UTC),
        "run_id": channel,
        "kind": "step",
        "payload": {"n": n},
        "operation_id": operation_id,
        "state_version": n,
        "state_cursor": n,
        "open_effects": [],
        "usage": {},
        "state": {**STATE, "step": n},
        "fingerprint": fingerprint,
        "state_checksum": state_checksum,
    }


# -- the rungs ------------------------------------------------------------------------------


@contextmanager
def raw_rung(raw: RawBaseline) -> Iterator[Writer]:
    with psycopg.connect(raw.dsn, autocommit=True) as conn:
        yield lambda count: raw.transitions(conn, uuid.uuid4(), count)


@contextmanager
def statement_rung(url: str, statement: sql.SQL | str) -> Iterator[Writer]:
    """Rows 2 and 3: Actae's row in one plain psycopg statement."""
    dsn, schema = url.split("?schema=")
    text: str | sql.SQL = statement
    if isinstance(statement, sql.SQL):
        text = statement.format(
            table=sql.Identifier(schema, "actae_events"),
            sequence=sql.Literal(f'"{schema}".actae_events_notification_id_seq'),
        ).as_string()

    # The recorder's statement names its sequence unqualified, as its pooled sessions
    # (which look in the store's schema first) resolve it.
    with psycopg.connect(dsn, autocommit=True, options=f"-c search_path={schema}") as conn:

        def write(count: int) -> list[float]:
            channel = uuid.uuid4()

            def one(n: int) -> object:
                params: list[Any] = [v for e in event_rows(channel, n) for v in _columns(e)]
                if str(text).count("%s") > len(params):  # the recorder's: its key guard's
                    params += ["{" + str(channel) + "}", False]  # the runs, sealed or not
                return conn.execute(text, params, prepare=True).fetchall()

            return timings_ms(one, range(1, count + 1))

        yield write


def _columns(event: StoredEvent) -> tuple[Any, ...]:
    key = operation_id_of(event)
    return event.originator_id, event.originator_version, event.topic, event.state, key


PLAIN_INSERT = sql.SQL(
    "INSERT INTO {table}"
    " (notification_id, originator_id, originator_version, topic, state, operation_id)"
    " VALUES (nextval({sequence}), %s, %s, %s, %s, %s) RETURNING notification_id"
)


@contextmanager
def store_rung(url: str, *, integrity: bool) -> Iterator[Writer]:
    """Rows 4 and 5: the recorder itself, with or without Actae's integrity work."""
    with actae.open(url) as store:
        service = store._service  # the recorder is not public; this is a measurement
        recorder, codec, limit = service.recorder, service.codec, service.max_document_bytes

        def write(count: int) -> list[float]:
            channel = uuid.uuid4()

            def one(n: int) -> object:
                checksums = None
                if integrity:
                    _, payload = require_json("payload", {"n": n}, codec, max_bytes=limit)
                    state = require_document("state", {**STATE, "step": n}, codec, max_bytes=limit)
                    content = fingerprint(
                        "transition", str(channel), "step", payload.decode(), state.checksum
                    )
                    checksums = (state.checksum, content)
                return recorder.insert_events(event_rows(channel, n, checksums))

            return timings_ms(one, range(1, count + 1))

        yield write


@contextmanager
def actae_rung(url: str) -> Iterator[Writer]:
    with actae.open(url) as store:
        run = store.start_run(f"anatomy-{uuid.uuid4()}", agent_id="bench", state=STATE)
        written = 0

        def write(count: int) -> list[float]:
            nonlocal written
            timings: list[float] = []
            actae_transitions(store, count, timings, run=run, first=written)(0)
            written += count
            return timings

        yield write


RUNGS: tuple[tuple[str, str], ...] = (
    ("raw", "one row, unique operation id (the baseline)"),
    ("event row", "+ Actae's event row: its table, indexes, unique operation id"),
    ("positions", "+ a block of positions from the sequence (the recorder's statement)"),
    ("recorder", "+ ActaePostgresRecorder.insert_events (pool, errors, retry)"),
    ("integrity", "+ validation, canonical JSON, SHA-256 checksums, fingerprint"),
    ("Actae", "+ domain model: Store.transition"),
)


def opener(name: str, raw: RawBaseline, url: str, ordered: str) -> Callable[[], Any]:
    """A function that opens rung ``name``'s writer (a context manager)."""
    return {
        "raw": lambda: raw_rung(raw),
        "event row": lambda: statement_rung(url, PLAIN_INSERT),
        "positions": lambda: statement_rung(url, ordered),
        "recorder": lambda: store_rung(url, integrity=False),
        "integrity": lambda: store_rung(url, integrity=True),
        "Actae": lambda: actae_rung(url),
    }[name]


# -- measuring ------------------------------------------------------------------------------


def machine_busy_seconds() -> float:
    """CPU seconds all cores spent busy since boot (Linux), or NaN elsewhere."""
    if not PROC_STAT.exists():
        return math.nan
    ticks = [int(v) for v in PROC_STAT.read_text().split("\n", 1)[0].split()[1:]]
    idle = ticks[3] + ticks[4]  # idle and iowait
    return (sum(ticks) - idle) / 100  # USER_HZ is 100 on Linux


def one_connection(openers: dict[str, Callable[[], Any]]) -> dict[str, dict[str, float]]:
    """Every rung on its own connection, all open at once, taking turns of ``TURN`` writes."""
    with ExitStack() as stack:
        writers = {
            name: stack.enter_context(open_writer()) for name, open_writer in openers.items()
        }
        for write in writers.values():
            write(20)  # warm the connection and prepared statements
        turns = {name: Turns() for name in writers}
        for _ in range(TURNS):
            for name, write in writers.items():
                turns[name].take(TURN, partial(write, TURN))
    return {
        name: {"per_s": t.figures()["per_s"], "cpu_us": t.figures()["cpu_us"]}
        for name, t in turns.items()
    }


def four_processes(open_writer: Callable[[], Any]) -> dict[str, float]:
    def job(index: int, ready: Any, out: Any) -> None:
        with open_writer() as write:
            write(5)
            ready.wait()
            out.put(write(PER_WORKER))

    busy: list[float] = []
    per_s, _ = in_processes(job, WORKERS, PER_WORKER, lambda: busy.append(machine_busy_seconds()))
    machine = (machine_busy_seconds() - busy[0]) / (WORKERS * PER_WORKER) * 1e6
    return {"per_s": per_s, "machine_cpu_us": machine}


def measure(dsn: str) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:8]
    raw_schema, schema = f"bench_{tag}_anatomy_raw", f"bench_{tag}_anatomy"
    url = with_schema(dsn, schema)
    raw = RawBaseline(dsn, raw_schema)
    try:
        with actae.open(url) as store:  # creates the schema once, before any process forks
            recorder = cast(ActaePostgresRecorder, store._service.recorder)
            ordered = recorder.insert_statement(1)
        openers = {name: opener(name, raw, url, ordered) for name, _ in RUNGS}
        progress(f"anatomy of a transition: 1 connection per rung, turns of {TURN}")
        single = one_connection(openers)
        rounds = []
        for round_ in range(1, ROUNDS + 1):
            progress(f"anatomy of a transition: {WORKERS} processes, round {round_} of {ROUNDS}")
            rounds.append(
                {name: four_processes(open_writer) for name, open_writer in openers.items()}
            )
        many: dict[str, Any] = medians(rounds)
        return {name: {"1": single[name], "4": many[name]} for name, _ in RUNGS}
    finally:
        drop_schemas(dsn, raw_schema, schema)


# -- report ---------------------------------------------------------------------------------


def table(results: dict[str, Any]) -> str:
    base = results["rungs"]["raw"]
    lines = [
        "| rung | adds | 1 conn /s | of raw | client CPU µs | 4 procs /s | of raw "
        "| machine CPU µs |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, adds in RUNGS:
        one, four = results["rungs"][name]["1"], results["rungs"][name]["4"]
        machine = four["machine_cpu_us"]
        lines.append(
            f"| {name} | {adds} | {one['per_s']:,.0f} | {one['per_s'] / base['1']['per_s']:.0%} "
            f"| {one['cpu_us']:,.0f} | {four['per_s']:,.0f} "
            f"| {four['per_s'] / base['4']['per_s']:.0%} "
            f"| {'-' if math.isnan(machine) else f'{machine:,.0f}'} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dsn", default=DSN)
    args = parser.parse_args()
    results = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "rungs": measure(args.dsn),
    }
    save("anatomy", results)
    print(f"\nAnatomy of a transition (PostgreSQL), {results['date']}\n")
    print(table(results))


if __name__ == "__main__":
    main()
