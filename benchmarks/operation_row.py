"""The operation record: a row of its own, or folded into the event row (issue 18, decision 3).

A plain ``record``/``transition`` with an ``operation_id`` writes two rows in one statement
today: the channel's event and an *operation record* (aggregate ``Operation``, version 1,
its id ``uuid5`` of the operation id). The record's primary key refuses a second execution
of the same operation id, and it holds the command's fingerprint, so a repeat with the same
content gets the recorded answer and one with other content a conflict (idempotency by
content). In ``benchmarks.anatomy`` that second row costs a few points of the raw baseline on
one connection and more in four processes. The alternative measured here folds the
operation id into the event row: the events table gets a nullable ``operation_id text``
column with a unique index, and the fingerprint travels in the event's own state, so a
repeat is refused by that index and the answer is read back from the event row by its
operation id. The writes compared, each the statement a transition would send:

- **raw**: the raw baseline of ``benchmarks.raw`` (one row, a unique operation id).
- **A, separate record**: the recorder's own statement (``insert_statement(2)``: one
  ``nextval`` per statement, positions ``block * 4096 + ordinal``) with the two rows
  ``separate_rows`` builds: the ``positions`` rung of the anatomy before migration 4.
- **B, folded (partial index)**: the same statement for one row, with the extra column
  (``insert_statement(1)`` with ``operation_id`` added to its column list and ``VALUES``
  row, nothing else changed; checked against the recorder's text), into a copy of the
  table that has ``operation_id text`` and ``UNIQUE … (operation_id) WHERE operation_id IS
  NOT NULL``. The event's state is A's event plus the record's ``command`` and
  ``fingerprint``.
- **B plain**: the same with a plain unique index (over every row, NULLs included).
- **B scattered**: B with operation ids that do not sort together (a hashed prefix):
  A's record id is a uuid5, so its primary-key entry always lands on a random leaf,
  while B's ids here sort by channel, as ``RunContext``'s keys sort by run.
- **B key**: folded too, but the column is ``operation_key uuid``, the Operation's id
  (``uuid5`` of the operation id), and the unique index is on ``coalesce(operation_key,
  originator_id)`` over the rows that carry a key *and* every Operation's first row
  (a command's record, an effect's registration): one namespace for folded records and
  the Operation rows that stay (starts, forks, effects, and every record written before
  the migration, which the index build picks up without rewriting a row).

Every folded table is migrated as a store would be: one transition recorded in the
separate layout, then the column and the index. (Measured before migration 4 adopted B: each
table is put back to schema version 3's layout first, and A's statement is the recorder's
of that version.)

Each write has its own schema and table, created by ``actae.open`` (so the table,
sequence and indexes are Actae's). After measuring (the tables full and analysed),
``check_idempotency`` shows that every layout refuses a repeated operation id at the next
cursor of the channel, writes nothing of the refused statement, names the refusing
constraint, and gives back the fingerprint by one index lookup (the lookup's generic plan
is checked for the index); and whether a folded repeat of a record written in today's
layout before the migration is refused.

Measured like ``benchmarks.anatomy``, but interleaved in four processes too. On **1
connection** every write has its own connection, all open at once, taking turns of 100
writes (the order rotating each turn, so a drifting machine treats them alike). In **4
client processes** (fork) each process holds every write's connection, and all four run
turns of the same write together between two barriers, the order rotating likewise (timed
one after the other, as the anatomy does, the four processes' rates moved by more than the
effect from round to round on this VM). Figures are medians over rounds; "of raw" is the
median over *cycles* (one turn of each write, next to each other in time) of the write's
rate over raw's in the same cycle, and "B - A" is the median over cycles of the
difference of those ratios, in points of raw, with its quartiles and each round's median
(the run's own spread). "B plain" is B with a plain unique index: for writes that carry
an id it does the same work as B, so "B plain - B" is a direct reading of the noise. Also
reported: client CPU per write (1 connection), the whole machine's CPU per write (4
processes, ``/proc/stat``), WAL bytes per write (``pg_current_wal_insert_lsn`` around each
turn; the server's, so anything else writing there counts too: medians over turns), bytes
on disk per write (table, TOAST and indexes afterwards, vacuumed), the repeat path's
lookup (p50 µs of reading the recorded answer), and the client work the library itself
spends on a record (``record_client_us``), which the statement-level writes leave out.

Run with ``python -m benchmarks.operation_row [--dsn DSN]``; results go to
``benchmarks/results/operation_row.json``.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any, cast

import orjson
import psycopg
from eventsourcing.persistence import StoredEvent
from psycopg import errors, sql

import actae
from actae.adapters.persistence.postgres import ActaePostgresRecorder
from actae.domain.operation import Operation
from benchmarks.anatomy import (
    EVENT_TOPIC,
    NO_CHECKSUM,
    Writer,
    machine_busy_seconds,
    raw_rung,
    transition_body,
)
from benchmarks.common import (
    DSN,
    drop_schemas,
    latency,
    medians,
    progress,
    save,
    stamp,
    timings_ms,
    with_schema,
)
from benchmarks.core import Turns
from benchmarks.raw import RawBaseline

ROUNDS = 9
TURN, TURNS = 100, 20
"""Per round, 1 connection: ``TURNS`` turns of ``TURN`` writes for each write."""
WORKERS, PROCESS_TURN, PROCESS_TURNS = 4, 250, 8
"""Per round, ``WORKERS`` processes: ``PROCESS_TURNS`` turns of ``PROCESS_TURN`` writes each."""
WAIT = 600.0
"""Seconds a barrier waits before giving up (a client process died)."""
OPERATION_INDEX = "actae_events_operation_id"

WRITES: tuple[tuple[str, str], ...] = (
    ("raw", "one row, unique operation id (the baseline)"),
    ("A", "separate record: event row + operation record row (today)"),
    ("B", "folded: one event row, operation_id text, partial unique index"),
    ("B plain", "folded, plain unique index (NULLs indexed too)"),
    ("B scattered", "B with operation ids in random order (a hashed prefix)"),
    ("B key", "folded: operation_key uuid, one unique index with the Operation rows"),
)

Params = Callable[[uuid.UUID, int], list[Any]]
"""The statement parameters of transition ``n`` on a channel."""


# -- the rows -------------------------------------------------------------------------------


OPERATION_TOPIC = "Operation.Executed"


def separate_rows(channel: uuid.UUID, n: int) -> list[StoredEvent]:
    """A's rows of transition ``n``: the event and the operation record.

    As Actae wrote them before migration 4 (the anatomy's rows of that time: the event
    without a fingerprint).
    """
    operation_id = f"{channel}:{n}"
    event = transition_body(channel, n, operation_id, NO_CHECKSUM, NO_CHECKSUM)
    del event["fingerprint"]
    record = {
        "timestamp": event["timestamp"],
        "originator_topic": "Operation",
        "operation_id": operation_id,
        "command": "transition",
        "fingerprint": NO_CHECKSUM,
        "result": {"cursor": n + 1, "state_version": n + 1},
    }
    return [
        StoredEvent(channel, n + 1, EVENT_TOPIC, orjson.dumps(event)),
        StoredEvent(Operation.id_for(operation_id), 1, OPERATION_TOPIC, orjson.dumps(record)),
    ]


def separate_params(channel: uuid.UUID, n: int) -> list[Any]:
    """A: the event row and the operation record row, as Actae encodes them."""
    return [v for e in separate_rows(channel, n) for v in columns(e)]


def operation_id_of(channel: uuid.UUID, n: int, *, scattered: bool = False) -> str:
    """Transition ``n``'s operation id, sorting by channel or ``scattered``.

    By channel, as ``RunContext``'s keys sort by run (``run:kind:name:n``); scattered, as
    a caller's own random ids would be: the first eight hex digits are a multiplicative
    hash of ``n`` (same width, about the same client work).
    """
    text = str(channel)
    return f"{n * 0x9E3779B1 & 0xFFFFFFFF:08x}{text[8:]}:{n}" if scattered else f"{text}:{n}"


def folded_params(
    channel: uuid.UUID, n: int, key: Callable[[str], Any] = str, *, scattered: bool = False
) -> list[Any]:
    """B: ``separate_rows``' event alone, with the record's command and fingerprint, and its key.

    Built like ``separate_rows`` (same fields, same sizes), one document
    encoded instead of two. ``key`` makes the column's value of the operation id.
    """
    operation_id = operation_id_of(channel, n, scattered=scattered)
    event = {
        **transition_body(channel, n, operation_id, NO_CHECKSUM, NO_CHECKSUM),
        "command": "transition",
    }
    return [channel, n + 1, EVENT_TOPIC, orjson.dumps(event), key(operation_id)]


def columns(event: StoredEvent) -> tuple[Any, ...]:
    return event.originator_id, event.originator_version, event.topic, event.state


# -- the statements and tables --------------------------------------------------------------

OPERATION_TOPICS = (OPERATION_TOPIC, "Operation.Registered")
"""The topics of an Operation's first event: a command's record, an effect's registration."""
KEY = "coalesce(operation_key, originator_id)"
KEY_ROWS = (
    "(operation_key IS NOT NULL OR (originator_version = 1 AND topic IN "
    f"('{OPERATION_TOPICS[0]}', '{OPERATION_TOPICS[1]}')))"
)


@dataclass(frozen=True)
class Folded:
    """A folded layout: the column an event row carries, its unique index, its lookup."""

    column: str
    type: str
    index: str
    """What follows ``CREATE UNIQUE INDEX … ON table``."""
    where: str
    """The lookup's condition, one parameter: the column's value."""
    key: Callable[[str], Any]
    """The column's value of an operation id."""
    scattered: bool = False
    """Operation ids in random order (``operation_id_of``)."""


FOLDED = {
    # Partial: rows without an operation id (an effect's claims and completions, commands
    # given none, runs' own events) add no entry, and `operation_id = $1` implies the
    # predicate, so the lookup uses it. The writes measured all carry an id, so B and B
    # plain do the same work per write; only the index's size on a real store differs.
    "B": Folded(
        "operation_id",
        "text",
        "(operation_id) WHERE operation_id IS NOT NULL",
        "operation_id = %s",
        str,
    ),
    "B plain": Folded("operation_id", "text", "(operation_id)", "operation_id = %s", str),
    # B with operation ids that do not sort by channel: every insert lands on a random leaf
    # of the index, as the Operation rows' uuid5 ids of today (A) always do.
    "B scattered": Folded(
        "operation_id",
        "text",
        "(operation_id) WHERE operation_id IS NOT NULL",
        "operation_id = %s",
        str,
        scattered=True,
    ),
    # The Operation id (uuid5 of the operation id) in the event row, unique together with
    # the Operation rows' own ids: a repeat collides with a folded record or with an
    # Operation row (today's, or a start's, fork's or effect's), without a backfill.
    "B key": Folded(
        "operation_key",
        "uuid",
        f"(({KEY})) WHERE {KEY_ROWS}",
        f"{KEY} = %s AND {KEY_ROWS}",
        Operation.id_for,
    ),
}
LEGACY = uuid.UUID(int=1)
"""The channel of a transition recorded in today's layout before the column existed."""


def folds(column: str, type_: str) -> tuple[tuple[str, str], ...]:
    """Edits that turn the recorder's statement for one row into the folded one."""
    return (
        (" topic, state)", f" topic, state, {column})"),
        (" e.topic, e.state FROM", f" e.topic, e.state, e.{column} FROM"),
        ("%s::bytea, 0)", f"%s::bytea, %s::{type_}, 0)"),
        ("topic, state, ordinal)", f"topic, state, {column}, ordinal)"),
    )


def folded_statement(recorder_statement: str, column: str, type_: str) -> str:
    """``insert_statement(1)`` with the column added; every edit applies exactly once."""
    text = recorder_statement
    for old, new in folds(column, type_):
        if text.count(old) != 1:
            raise RuntimeError(f"the recorder's statement changed shape: {old!r} not once")
        text = text.replace(old, new)
    return text


def schema_3_statement(recorder_statement: str, rows: int) -> str:
    """The recorder's statement for ``rows`` rows as it was before migration 4 adopted B.

    The store's table is put back to that layout too (:func:`open_table`), so that A is
    the write it was and each B starts from it.
    """
    text = recorder_statement
    for old, new, count in (
        (", operation_id)", ")", 1),
        (", e.operation_id FROM", " FROM", 1),
        ("%s::bytea, %s::text,", "%s::bytea,", rows),
        ("state, operation_id, ordinal)", "state, ordinal)", 1),
    ):
        if text.count(old) != count:
            raise RuntimeError(f"the recorder's statement changed shape: {old!r}")
        text = text.replace(old, new)
    return text


def open_table(dsn: str, schema: str, folded: Folded | None) -> str:
    """Actae's events table in ``schema``; the statement of one transition's write.

    Without ``folded``: the recorder's statement for two rows. With it, the table is
    migrated as a store would be: a transition recorded in today's layout (on channel
    ``LEGACY``), then the column and its unique index; the statement is the folded one.
    """
    with actae.open(with_schema(dsn, schema)) as store:  # before any process forks
        recorder = cast(ActaePostgresRecorder, store._service.recorder)
        two = schema_3_statement(recorder.insert_statement(2), 2)
        one = schema_3_statement(recorder.insert_statement(1), 1)
    table = sql.Identifier(schema, "actae_events")
    with psycopg.connect(dsn, autocommit=True) as conn:  # the layout of schema version 3
        conn.execute(sql.SQL("ALTER TABLE {} DROP COLUMN operation_id").format(table))
    if folded is None:
        return two
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(two, separate_params(LEGACY, 1)).fetchall()
        conn.execute(
            sql.SQL("ALTER TABLE {} ADD COLUMN {} {}").format(
                table, sql.Identifier(folded.column), sql.SQL(folded.type)
            )
        )
        conn.execute(
            sql.SQL("CREATE UNIQUE INDEX {} ON {} {}").format(
                sql.Identifier(OPERATION_INDEX), table, sql.SQL(folded.index)
            )
        )
    return folded_statement(one, folded.column, folded.type)


@contextmanager
def statement_writer(dsn: str, text: str, params: Params) -> Iterator[Writer]:
    """Writes through one prepared statement on one autocommitted connection."""
    with psycopg.connect(dsn, autocommit=True) as conn:

        def write(count: int) -> list[float]:
            channel = uuid.uuid4()

            def one(n: int) -> object:
                return conn.execute(text, params(channel, n), prepare=True).fetchall()

            return timings_ms(one, range(1, count + 1))

        yield write


# -- idempotency by content, in both layouts ------------------------------------------------


def check_idempotency(
    dsn: str, schemas: dict[str, str], statements: dict[str, str], params: dict[str, Params]
) -> dict[str, Any]:
    """Every layout refuses a repeat, writes nothing of it, and gives back the fingerprint.

    A repeat of transition 1's operation id arrives at the channel's next cursor (as a
    retried command would, after another transition); it must be refused as a whole. The
    recorded answer is then read as the command would read it: A by the record's aggregate
    id, a folded layout by its column. For a folded layout, a repeat of the transition
    recorded in today's layout before the column existed (``open_table``) is sent too:
    whether it is refused says whether the layout needs existing records backfilled.
    Returns the refusing constraints, the lookups' plans and times.
    """
    found: dict[str, Any] = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET plan_cache_mode = force_generic_plan")  # the plan a prepared lookup gets
        for name, statement in statements.items():
            table = sql.Identifier(schemas[name], "actae_events").as_string(conn)
            folded = FOLDED.get(name)
            channel = uuid.uuid4()
            conn.execute(statement, params[name](channel, 1)).fetchall()
            repeat = params[name](channel, 1)
            repeat[1] += 1  # the event at the next cursor, same operation id and content
            try:
                conn.execute(statement, repeat).fetchall()
                raise AssertionError(f"{name}: a repeated operation id was written")
            except errors.UniqueViolation as error:
                constraint = error.diag.constraint_name
            written = conn.execute(
                f"SELECT count(*) FROM {table} WHERE originator_id = %s", (channel,)
            ).fetchone()
            assert written == (1,), f"{name}: part of the refused write was kept"
            operation_id = operation_id_of(channel, 1, scattered=bool(folded and folded.scattered))
            if folded is None:
                where, key_type = "originator_id = %s AND originator_version = 1", "uuid"
                key: Any = Operation.id_for(operation_id)
            else:
                where, key_type, key = folded.where, folded.type, folded.key(operation_id)
            lookup = f"SELECT state FROM {table} WHERE {where}"
            row = conn.execute(lookup, (key,)).fetchone()
            assert row is not None, f"{name}: the recorded answer was not found"
            assert orjson.loads(row[0])["fingerprint"] == NO_CHECKSUM, name
            prepared = f"lookup_{name.replace(' ', '_').lower()}"
            conn.execute(f"PREPARE {prepared}({key_type}) AS {lookup.replace('%s', '$1')}")
            explain = sql.SQL("EXPLAIN EXECUTE {}({})").format(
                sql.Identifier(prepared), sql.Literal(str(key))
            )
            plan = " ".join(r[0] for r in conn.execute(explain))
            assert "Index" in plan, f"{name}: the lookup does not use an index: {plan}"
            read = latency(partial(conn.execute, lookup, (key,)))
            found[name] = {
                "refused_by": constraint,
                "lookup_plan": plan,
                "lookup_p50_us": read["p50_ms"] * 1000,
            }
            if folded is not None:
                found[name]["legacy_repeat_refused"] = legacy_refused(conn, statement, params[name])
    return found


def legacy_refused(conn: psycopg.Connection[Any], statement: str, params: Params) -> bool:
    """Whether a folded repeat of the transition recorded before the column is refused."""
    repeat = params(LEGACY, 1)
    repeat[0] = uuid.uuid4()  # another channel: only the operation id is the same
    try:
        conn.execute(statement, repeat).fetchall()
    except errors.UniqueViolation:
        return True
    return False


# -- measuring ------------------------------------------------------------------------------


def record_client_us(url: str, count: int = 2000, repeats: int = 5) -> float:
    """µs of client work the library spends on one operation record before the statement.

    ``Operation.executed`` and the store's mapper (``to_stored_event``), as
    ``ActaeService.save`` runs them for the record: the statement-level writes above build
    the record's row with plain dicts instead, so this is what folding would save in the
    client besides. The fastest of ``repeats`` runs of ``count`` records.
    """
    with actae.open(url) as store:
        mapper = store._service.mapper  # not public; this is a measurement
        at = datetime.now(UTC)
        best = math.inf
        for _ in range(repeats):
            start = time.perf_counter()
            for n in range(count):
                mapper.to_stored_event(
                    Operation.executed(
                        operation_id=f"bench:{n}",
                        command="transition",
                        fingerprint=NO_CHECKSUM,
                        result={"cursor": n + 1, "state_version": n + 1},
                        at=at,
                    )
                )
            best = min(best, (time.perf_counter() - start) / count * 1e6)
    return best


def wal_lsn(conn: psycopg.Connection[Any]) -> int:
    """The server's WAL insert position, in bytes."""
    row = conn.execute("SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn").fetchone()
    assert row is not None
    return int(row[0])


def order(names: list[str], turn: int) -> list[str]:
    """The writes in turn ``turn``: rotated by one each turn."""
    shift = turn % len(names)
    return names[shift:] + names[:shift]


def one_connection(
    openers: dict[str, Callable[[], Any]], monitor: psycopg.Connection[Any]
) -> tuple[dict[str, dict[str, float]], list[dict[str, float]]]:
    """One round: every write on its own connection, taking turns of ``TURN`` writes.

    Returns the round's figures and its cycles (each write's rate in each turn).
    """
    with ExitStack() as stack:
        writers = {
            name: stack.enter_context(open_writer()) for name, open_writer in openers.items()
        }
        for write in writers.values():
            write(20)  # warm the connection and prepared statements
        turns = {name: Turns() for name in writers}
        wal: dict[str, list[float]] = {name: [] for name in writers}
        cycles: list[dict[str, float]] = []
        for turn in range(TURNS):
            cycle = {}
            for name in order(list(writers), turn):
                before, elapsed = wal_lsn(monitor), turns[name].elapsed
                turns[name].take(TURN, partial(writers[name], TURN))
                cycle[name] = TURN / (turns[name].elapsed - elapsed)
                wal[name].append((wal_lsn(monitor) - before) / TURN)
            cycles.append(cycle)
    figures = {
        name: {
            "per_s": t.figures()["per_s"],
            "cpu_us": t.figures()["cpu_us"],
            "wal_bytes": statistics.median(wal[name]),
        }
        for name, t in turns.items()
    }
    return figures, cycles


def four_processes(
    openers: dict[str, Callable[[], Any]], monitor: psycopg.Connection[Any]
) -> tuple[list[dict[str, dict[str, float]]], list[list[dict[str, float]]]]:
    """Every round in ``WORKERS`` client processes, the writes taking turns together.

    Each process opens every write's connection once; in each turn all processes run
    ``PROCESS_TURN`` writes of the same kind, between two barriers. The clock, the
    machine's CPU and the WAL position are read around each turn, so a drifting machine
    treats the writes alike here too (timed one after the other, four processes' rates
    differed by twice the effect from round to round). Returns each round's figures and
    its cycles (each write's rate in each turn).
    """
    names = list(openers)
    turns = ROUNDS * PROCESS_TURNS
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(WORKERS + 1)

    def job() -> None:
        with ExitStack() as stack:
            writers = {n: stack.enter_context(open_writer()) for n, open_writer in openers.items()}
            for write in writers.values():
                write(5)
            barrier.wait(WAIT)
            for turn in range(turns):
                for name in order(names, turn):
                    barrier.wait(WAIT)
                    writers[name](PROCESS_TURN)
                    barrier.wait(WAIT)

    procs = [context.Process(target=job) for _ in range(WORKERS)]
    for proc in procs:
        proc.start()
    rounds: list[dict[str, dict[str, float]]] = []
    cycles: list[list[dict[str, float]]] = []
    try:
        barrier.wait(WAIT)  # every process connected and warm
        for round_ in range(ROUNDS):
            progress(
                f"{WORKERS} processes, turns of {PROCESS_TURN}: round {round_ + 1} of {ROUNDS}"
            )
            seconds = dict.fromkeys(names, 0.0)
            busy_s = dict.fromkeys(names, 0.0)
            wal: dict[str, list[float]] = {name: [] for name in names}
            cycles.append([])
            for turn in range(round_ * PROCESS_TURNS, (round_ + 1) * PROCESS_TURNS):
                cycles[-1].append({})
                for name in order(names, turn):
                    busy, lsn = machine_busy_seconds(), wal_lsn(monitor)
                    barrier.wait(WAIT)
                    start = time.perf_counter()
                    barrier.wait(WAIT)
                    elapsed = time.perf_counter() - start
                    seconds[name] += elapsed
                    cycles[-1][-1][name] = WORKERS * PROCESS_TURN / elapsed
                    busy_s[name] += machine_busy_seconds() - busy
                    wal[name].append((wal_lsn(monitor) - lsn) / (WORKERS * PROCESS_TURN))
            writes = WORKERS * PROCESS_TURN * PROCESS_TURNS
            rounds.append(
                {
                    name: {
                        "per_s": writes / seconds[name],
                        "machine_cpu_us": busy_s[name] / writes * 1e6,
                        "wal_bytes": statistics.median(wal[name]),
                    }
                    for name in names
                }
            )
    except BaseException:
        barrier.abort()  # the processes stop waiting and end
        raise
    finally:
        for proc in procs:
            proc.join(WAIT)
    failed = [proc.exitcode for proc in procs if proc.exitcode != 0]
    if failed:
        raise RuntimeError(f"benchmark client processes exited with {failed}")
    return rounds, cycles


def on_disk(dsn: str, schemas: dict[str, str]) -> dict[str, dict[str, float]]:
    """Bytes per write: the events table with TOAST and indexes, and its indexes alone."""
    out = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        for name, schema in schemas.items():
            table = sql.Identifier(schema, "events" if name == "raw" else "actae_events")
            name_ = table.as_string(conn)
            conn.execute(sql.SQL("VACUUM ANALYZE {}").format(table))
            row = conn.execute(
                sql.SQL(
                    "SELECT pg_total_relation_size(%s::regclass), pg_indexes_size(%s::regclass), "
                    "(SELECT count(*) FROM {})"
                ).format(table),
                (name_, name_),
            ).fetchone()
            assert row is not None
            total, indexes, rows = row
            writes = rows / 2 if name == "A" else rows  # A writes two rows per transition
            out[name] = {"bytes": total / writes, "index_bytes": indexes / writes}
    return out


COMPARED = (("B", "A"), ("B scattered", "A"), ("B key", "A"), ("B plain", "B"))
"""Differences reported, in points of raw: B plain - B reads the noise (the same work)."""


def difference(cycle: dict[str, float], one: str, other: str) -> float:
    """``one`` - ``other`` in points of raw, in one cycle of turns."""
    return 100 * (cycle[one] - cycle[other]) / cycle["raw"]


def summarise(
    rounds: list[dict[str, Any]], cycles: dict[str, list[list[dict[str, float]]]], names: list[str]
) -> dict[str, Any]:
    """Medians over rounds of each figure; ratios and differences over cycles, and per round.

    A cycle is one turn of each write, next to each other in time: its ratios are paired,
    so the median over all cycles follows the machine's drift least.
    """
    out: dict[str, Any] = {name: medians([r[name] for r in rounds]) for name in names}
    out["differences"] = {}
    for side in ("1", "4"):
        every = [cycle for round_ in cycles[side] for cycle in round_]
        for name in names:
            out[name][side]["of_raw"] = statistics.median(c[name] / c["raw"] for c in every)
        for one, other in COMPARED:
            points = sorted(difference(c, one, other) for c in every)
            out["differences"][f"{one} - {other}, {side}"] = {
                "median": statistics.median(points),
                "quartiles": [points[len(points) // 4], points[3 * len(points) // 4]],
                "cycles": len(points),
                "per_round": [
                    statistics.median(difference(c, one, other) for c in round_)
                    for round_ in cycles[side]
                ],
            }
    return out


def measure(dsn: str) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:8]
    schemas = {
        "raw": f"bench_{tag}_oprow_raw",
        "A": f"bench_{tag}_oprow_a",
        "B": f"bench_{tag}_oprow_b",
        "B plain": f"bench_{tag}_oprow_bplain",
        "B scattered": f"bench_{tag}_oprow_bscattered",
        "B key": f"bench_{tag}_oprow_bkey",
    }
    try:
        raw = RawBaseline(dsn, schemas["raw"])
        statements = {"A": open_table(dsn, schemas["A"], None)}
        params: dict[str, Params] = {"A": separate_params}
        for name, folded in FOLDED.items():
            statements[name] = open_table(dsn, schemas[name], folded)
            params[name] = partial(folded_params, key=folded.key, scattered=folded.scattered)
        record_us = record_client_us(with_schema(dsn, schemas["A"]))
        openers: dict[str, Callable[[], Any]] = {"raw": lambda: raw_rung(raw)}
        for name, statement in statements.items():
            openers[name] = partial(statement_writer, dsn, statement, params[name])
        names = list(openers)
        rounds: list[dict[str, Any]] = [{name: {} for name in names} for _ in range(ROUNDS)]
        cycles: dict[str, list[list[dict[str, float]]]] = {"1": []}
        with psycopg.connect(dsn, autocommit=True) as monitor:
            for i, round_ in enumerate(rounds):
                progress(f"1 connection per write, turns of {TURN}: round {i + 1} of {ROUNDS}")
                figures, round_cycles = one_connection(openers, monitor)
                cycles["1"].append(round_cycles)
                for name in names:
                    round_[name]["1"] = figures[name]
            rounds4, cycles["4"] = four_processes(openers, monitor)
            for round_, figures4 in zip(rounds, rounds4, strict=True):
                for name in names:
                    round_[name]["4"] = figures4[name]
        disk = on_disk(dsn, schemas)  # vacuumed and analysed: the lookups' plans are real
        progress("idempotency by content: a repeat refused, its answer read back")
        checks = check_idempotency(dsn, schemas, statements, params)
        summary = summarise(rounds, cycles, names)
        for name in names:
            summary[name]["disk"] = disk[name]
        summary["record_client_us"] = record_us
        return {"results": summary, "idempotency": checks, "rounds": rounds, "cycles": cycles}
    finally:
        drop_schemas(dsn, *schemas.values())


# -- report ---------------------------------------------------------------------------------


def table(results: dict[str, Any]) -> str:
    figures = results["results"]
    lines = [
        "| write | 1 conn /s | of raw | client CPU µs | WAL B | 4 procs /s | of raw "
        "| machine CPU µs | WAL B | disk B | of it indexes |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, what in WRITES:
        one, four, disk = figures[name]["1"], figures[name]["4"], figures[name]["disk"]
        machine = four["machine_cpu_us"]
        lines.append(
            f"| {name}: {what} | {one['per_s']:,.0f} | {one['of_raw']:.0%} "
            f"| {one['cpu_us']:,.0f} | {one['wal_bytes']:,.0f} | {four['per_s']:,.0f} "
            f"| {four['of_raw']:.0%} "
            f"| {'-' if math.isnan(machine) else f'{machine:,.0f}'} | {four['wal_bytes']:,.0f} "
            f"| {disk['bytes']:,.0f} | {disk['index_bytes']:,.0f} |"
        )
    lines.append("")
    for side, label in (("1", "1 connection"), ("4", f"{WORKERS} processes")):
        for one, other in COMPARED:
            diff = figures["differences"][f"{one} - {other}, {side}"]
            low, high = diff["quartiles"]
            lines.append(
                f"{one} - {other}, {label}: {diff['median']:+.1f} points of raw, median of "
                f"{diff['cycles']} cycles (quartiles {low:+.1f}, {high:+.1f}; per round "
                f"{', '.join(f'{p:+.1f}' for p in diff['per_round'])})"
            )
    lines.append(
        "the library's client work for the record (Operation.executed + mapper): "
        f"{figures['record_client_us']:.0f} µs"
    )
    for name, check in results["idempotency"].items():
        legacy = check.get("legacy_repeat_refused")
        lines.append(
            f"{name}: a repeat is refused by {check['refused_by']}; "
            f"its answer read back in {check['lookup_p50_us']:.0f} µs p50"
            + (
                ""
                if legacy is None
                else f"; a repeat of a record from before the column: "
                f"{'refused' if legacy else 'WRITTEN (needs a backfill)'}"
            )
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dsn", default=DSN)
    args = parser.parse_args()
    results = {**stamp(), **measure(args.dsn)}
    save("operation_row", results)
    print(f"\nThe operation record: separate or folded (PostgreSQL), {results['date']}\n")
    print(table(results))


if __name__ == "__main__":
    main()
