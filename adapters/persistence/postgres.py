"""PostgreSQL recorder for the event store: one statement, one round trip per write.

eventsourcing's stock recorder writes in a pipelined transaction of five statements (``BEGIN``,
``LOCK TABLE … EXCLUSIVE``, ``NOTIFY``, ``INSERT``, ``COMMIT``) with three client-side syncs,
and composes its ``SELECT`` text anew on every read; that client work, not the database,
is most of the cost of a transition (docs/performance.md has the measurements). This
recorder keeps the stock table and positions, and changes how statements are sent:

* **A write is one autocommitted statement.** A CTE draws the write's block of positions
  from the table's sequence and inserts every event from a ``VALUES`` list of scalar
  parameters (no composite type or array to adapt); the implicit transaction commits when
  the statement ends.
* **No lock is held across commit, and writes do not notify.** Positions are blocks of the
  sequence (:mod:`actae.adapters.persistence.positions`), so concurrent writers commit
  independently and share WAL flushes (group commit); readers bound every read by the
  positions' *horizon*, waiting only for this store's writers in flight, so they never pass
  a position that a write in flight fills later. Nothing is notified, inside the write or
  beside it (a ``NOTIFY`` would serialize every commit of the cluster): readers look for
  new events themselves (:mod:`actae.adapters.readside.subscription`). Every
  writer of a store must use this recorder (``actae.open`` always does): the position
  column has no default (schema version 3), so a stock eventsourcing writer's insert fails.
* **A write proves its predecessor.** The statement inserts nothing, and draws no
  positions, if any event's previous version is neither stored nor in the same write
  (:mod:`actae.adapters.persistence.predecessors`): one index lookup per event, in the
  same statement, so a process that remembers a head the store lost cannot write past it.
* **A write whose reply was lost is recognised, not repeated.** After a connection error
  the write is sent again; if the store refuses it because the rows exist and they equal
  what this call sent byte for byte, the first attempt committed and its positions are
  returned (docs/lost-replies.md). Nothing is added to the normal path.
* **Reads use statement texts rendered once**, one per query shape.
* **Each pooled connection keeps one cursor**, used through a slimmer checkout than
  eventsourcing's ``get_connection`` (which also opens the pool and registers composite
  types on every call, neither needed by these statements); errors are translated to
  eventsourcing's exception classes the same way.
* **An async caller awaits its statements.** Inside an ``AsyncStore`` method (a greenback
  portal, :mod:`actae.adapters.persistence.awaiting`) each statement runs on a connection of
  psycopg's ``AsyncConnectionPool`` (:meth:`ActaePostgresRecorder.attach_async_pool`) and the
  calling coroutine is suspended until its rows arrive; the statements and their handling
  are the same.
* **A lone writer keeps its connection.** psycopg_pool hands idle connections out first in,
  first out, so a single-threaded caller would cycle through every pooled connection, and
  a statement costs about 10 % more on a server process other than the one that ran the
  previous statement (docs/performance.md). The recorder therefore keeps the connection its
  last statement returned, if no one is waiting for one, and the next statement takes it
  (:class:`KeptConnection`); concurrent statements take the others from the pool as usual.
  Only the pool's public API is used: ``getconn``, ``putconn``, ``get_stats``.
* **The store's clock is the server's** (:class:`DatabaseClock`, docs/time.md): read once
  while the store opens and then every :data:`RESAMPLE_EVERY` seconds through this
  recorder's pool; between readings time moves on this process's monotonic clock, so a
  write's time costs no statement.

Pipeline mode is not used: it hung on multi-megabyte statements on this stack (psycopg 3.3,
PostgreSQL 15; compare psycopg issue #685), and one statement per write needs no pipeline.
eventsourcing's own application-recorder test cases run against this class in
``tests/integration/test_postgres_recorder.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import struct
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final, LiteralString
from uuid import UUID

import psycopg
from eventsourcing.persistence import (
    DatabaseError,
    DataError,
    IntegrityError,
    InterfaceError,
    InternalError,
    Notification,
    NotSupportedError,
    OperationalError,
    PersistenceError,
    ProgrammingError,
    StoredEvent,
)
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
from psycopg.pq import ConnStatus, DiagnosticField, ExecStatus, TransactionStatus
from psycopg.pq.abc import PGconn, PGresult
from psycopg.rows import tuple_row
from psycopg.sql import SQL, Composable, Identifier, Literal
from psycopg_pool import AsyncConnectionPool, PoolClosed, PoolTimeout

from actae.adapters.persistence import clock as clocks
from actae.adapters.persistence.awaiting import awaiting, in_portal
from actae.adapters.persistence.clock import Execute, SampledClock
from actae.adapters.persistence.forgets import (
    KEYS_TABLE,
    SECRETS_TABLE,
    TOKEN_NAME,
    ForgetWatch,
    refuse_keyed,
)
from actae.adapters.persistence.lost_replies import (
    TRANSIENT_ERRORS,
    RecognisesOwnCommits,
    retried_on_connection_errors,
)
from actae.adapters.persistence.migrations import migrate_postgres
from actae.adapters.persistence.positions import BLOCK, Horizon
from actae.adapters.persistence.predecessors import PredecessorMissing, first_orphan
from actae.adapters.persistence.turns import DEFAULT_LOCK_WAIT
from actae.domain.ports import OperationRows, Request

MAX_VALUES_ROWS = 64
"""Inserts of up to this many events send scalars and keep their rendered statement."""
VALUES_ROW: Final = "(%s::{id_type}, %s::bigint, %s::text, %s::bytea, %s::text, {ordinal})"
UNNEST_ROWS: Final = (
    "SELECT * FROM unnest(%s::{id_type}[], %s::bigint[], %s::text[], %s::bytea[], %s::text[])"
    " WITH ORDINALITY"
)

INT8: Final = struct.Struct(">q")
"""A ``bigint`` in PostgreSQL's binary format."""
TEXT, BINARY = 0, 1
ROW_FORMATS: Final = (BINARY, BINARY, TEXT, BINARY, TEXT)
"""Wire formats of an inserted row's parameters: id (uuid), version, topic, body, operation id."""
UNKNOWN_STATEMENT: Final = b"26000"
"""SQLSTATE of a prepared statement the server does not know (invalid_sql_statement_name)."""

ORPHANS: Final = (
    "SELECT 1 FROM e WHERE e.originator_version > 1"
    " AND NOT EXISTS (SELECT 1 FROM {table} p WHERE p.originator_id = e.originator_id"
    " AND p.originator_version = e.originator_version - 1)"
    " AND NOT EXISTS (SELECT 1 FROM e q WHERE q.originator_id = e.originator_id"
    " AND q.originator_version = e.originator_version - 1)"
)
"""The rows of a write whose predecessor is neither stored nor in the write: any of them
and the write draws no block, so it inserts nothing (:mod:`~actae.adapters.persistence.
predecessors`). The lookups use the primary key's index, inside the one statement."""
TOGETHER_WHERE: Final[dict[bool | None, tuple[LiteralString, ...]]] = {
    True: ("originator_id = %s ORDER BY originator_version DESC LIMIT 1",),
    False: ("originator_id = %s",),
    None: ("originator_id = %s", "operation_id = %s AND originator_id <> %s"),
}
"""The branches of ``select_together`` per request: the last event, all events, or an
operation (its aggregate's events, and the row carrying its id if another's holds it)."""

TRANSLATED_ERRORS: tuple[tuple[type[psycopg.Error], type[PersistenceError]], ...] = (
    (psycopg.InterfaceError, InterfaceError),
    (psycopg.OperationalError, OperationalError),
    (psycopg.DataError, DataError),
    (psycopg.IntegrityError, IntegrityError),
    (psycopg.InternalError, InternalError),
    (psycopg.ProgrammingError, ProgrammingError),
    (psycopg.NotSupportedError, NotSupportedError),
    (psycopg.DatabaseError, DatabaseError),
    (psycopg.Error, PersistenceError),
)
"""psycopg's errors and the eventsourcing errors they become, first match wins (as in
eventsourcing's ``PostgresDatastore.get_connection``)."""


def stored_event(originator_id: UUID, version: int, topic: str, state: Any) -> StoredEvent:
    """A selected row as eventsourcing's stored event (``bytea`` arrives as a memoryview)."""
    return StoredEvent(originator_id, version, topic, bytes(state))


def conn_broken(error: psycopg.Error) -> bool:
    """A connection failed (not a pool that is full or closed: checking would not help)."""
    return isinstance(error, psycopg.OperationalError | psycopg.InterfaceError) and not isinstance(
        error, PoolTimeout | PoolClosed
    )


def translated(error: psycopg.Error) -> PersistenceError:
    """The eventsourcing error a psycopg error becomes."""
    target = next(target for source, target in TRANSLATED_ERRORS if isinstance(error, source))
    return target(str(error))


def insert_params(stored_events: Sequence[StoredEvent], guard: tuple[str, bool]) -> list[Any]:
    """The insert's parameters as psycopg adapts them, the key guard's ``guard`` last.

    Up to ``MAX_VALUES_ROWS`` events, five scalars per event; beyond, five arrays.
    """
    keys = [getattr(e, "operation_id", None) for e in stored_events]  # a StoredRecord's
    if len(stored_events) <= MAX_VALUES_ROWS:
        params = [
            value
            for e, key in zip(stored_events, keys, strict=True)
            for value in (e.originator_id, e.originator_version, e.topic, e.state, key)
        ]
    else:
        params = [
            [e.originator_id for e in stored_events],
            [e.originator_version for e in stored_events],
            [e.topic for e in stored_events],
            [e.state for e in stored_events],
            keys,
        ]
    return [*params, *guard]


def succeeded(result: PGresult, pgconn: PGconn) -> PGresult:
    """``result`` if its statement succeeded, else the error psycopg would have raised."""
    if result.status in (ExecStatus.TUPLES_OK, ExecStatus.COMMAND_OK):
        return result
    message = (result.error_message or pgconn.error_message).decode(errors="replace").strip()
    if pgconn.status == ConnStatus.BAD:
        raise psycopg.OperationalError(message)
    code = (result.error_field(DiagnosticField.SQLSTATE) or b"").decode()
    raise error_class(code)(message, info=result)


def error_class(code: str) -> type[psycopg.Error]:
    """The psycopg error class of SQLSTATE ``code``, else of its class (``08000`` for ``08…``)."""
    for known in (code, code[:2] + "000"):
        try:
            return psycopg.errors.lookup(known)
        except KeyError:
            continue
    return psycopg.DatabaseError


ReadShape = tuple[bool, bool, bool, bool]
"""(has ``gt``, has ``lte``, descending, has ``limit``): one rendered SELECT per shape."""


class KeptConnection:
    """The connection the recorder's last statement used, kept back for the next one.

    A connection is kept only if it is healthy and idle and keeping it leaves the pool an
    idle connection for others, with no one waiting; otherwise it goes back to the pool at
    once. (Room to open another is not enough: the clock, the data keys and the artifacts
    of an idle process would then make its pool grow past its one connection.) ``release``
    hands the kept one back (before the pool checks or closes its connections).
    """

    def __init__(self, pool: Any) -> None:
        self._pool = pool
        self._kept: Any = None
        self._lock = threading.Lock()

    def take(self) -> Any:
        """The kept connection if there is one, else one from the pool."""
        with self._lock:
            conn, self._kept = self._kept, None
        return conn if conn is not None else self._pool.getconn()

    def give_back(self, conn: Any) -> None:
        """Keep ``conn`` for the next statement, or return it to the pool."""
        # libpq's own status, read directly: ``conn.info`` would build an object and an enum
        # member on every statement.
        idle = conn.pgconn.transaction_status == TransactionStatus.IDLE
        if idle and self._others_served():
            with self._lock:
                conn, self._kept = self._kept, conn
            if conn is None:
                return
        self._pool.putconn(conn)

    def _others_served(self) -> bool:
        """Whether keeping a connection leaves others one without waiting for it."""
        stats = self._pool.get_stats()
        spare = stats.get("pool_available", 0) > 0  # not room to open one: an idle process
        return spare and not stats.get("requests_waiting", 0)

    def release(self) -> None:
        """Return the kept connection to the pool."""
        with self._lock:
            conn, self._kept = self._kept, None
        if conn is not None:
            self._pool.putconn(conn)


class ActaePostgresRecorder(RecognisesOwnCommits, PostgresApplicationRecorder):
    """Application recorder writing each batch of events in a single statement."""

    def __init__(
        self, datastore: PostgresDatastore, *, events_table_name: str = "stored_events"
    ) -> None:
        super().__init__(datastore, events_table_name=events_table_name)
        self.kept = KeptConnection(datastore.pool)
        self._table = SQL("{schema}.{table}").format(
            schema=Identifier(datastore.schema), table=Identifier(self.events_table_name)
        )
        self._keys = SQL("{schema}.{table}").format(
            schema=Identifier(datastore.schema), table=Identifier(KEYS_TABLE)
        )
        self._token = SQL("(SELECT value FROM {schema}.{table} WHERE name = {name})").format(
            schema=Identifier(datastore.schema),
            table=Identifier(SECRETS_TABLE),
            name=Literal(TOKEN_NAME),
        )
        self.forgets = ForgetWatch()
        """The forget token each read brings back (:mod:`~actae.adapters.persistence.forgets`)."""
        self._writes: dict[int, str] = {}
        self._direct: dict[int, tuple[bytes, bytes, Sequence[int]]] = {}
        self._uuid_ids = datastore.originator_id_type == "uuid"
        self._reads: dict[ReadShape, str] = {}
        self._together: dict[tuple[bool | None, ...], str] = {}
        self._cursors: weakref.WeakKeyDictionary[Any, psycopg.Cursor[Any]] = (
            weakref.WeakKeyDictionary()
        )
        self._notifications: dict[bool, str] = {}
        self._max_position = (
            self.max_notification_id_statement + SQL(" WHERE notification_id <= %s")
        ).as_string()
        self._pool_opened = False
        self.async_pool: AsyncConnectionPool[Any] | None = None
        self._async_loop: asyncio.AbstractEventLoop | None = None
        self._sequence: str | None = None
        self._horizon: Horizon | None = None
        self.before_commit: Any = None
        """A test hook: called after a write's insert, before its commit (``None``: off)."""

    async def attach_async_pool(self) -> None:
        """Open an ``AsyncConnectionPool`` like the datastore's pool, for callers in a portal.

        Same connection arguments, sizes and session settings (autocommit, the idle-in-
        transaction timeout) as eventsourcing's pool, whose connections the synchronous
        callers of this recorder keep using.
        """
        pool = self.datastore.pool
        arguments = pool.kwargs
        assert isinstance(arguments, dict)  # noqa: S101 - eventsourcing builds it as a dict
        idle_timeout = SQL("SET idle_in_transaction_session_timeout = '{0}ms'").format(
            int(self.datastore.idle_in_transaction_session_timeout * 1000)
        )

        async def configure(conn: psycopg.AsyncConnection[Any]) -> None:
            await conn.set_autocommit(True)
            await conn.execute(idle_timeout)

        self.async_pool = AsyncConnectionPool(
            kwargs=dict(arguments),
            min_size=pool.min_size,
            max_size=pool.max_size,
            timeout=pool.timeout,
            max_lifetime=pool.max_lifetime,
            max_idle=pool.max_idle,  # an idle process shrinks it as it does the blocking one
            configure=configure,
            name=f"{pool.name}-async",
            open=False,
        )
        await self.async_pool.open()
        self._async_loop = asyncio.get_running_loop()

    async def close_async_pool(self) -> None:
        """Close the pool :meth:`attach_async_pool` opened, if any."""
        if self.async_pool is not None:
            pool, self.async_pool, self._async_loop = self.async_pool, None, None
            await pool.close()

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """Insert events atomically in one statement; their positions, in order.

        A connection error leaves the outcome unknown: the statement may have committed and
        only its reply been lost. The write is then sent again; if the store refuses it
        because the rows exist, and they are byte for byte the rows this call sent, the
        first attempt committed and its positions are returned as if the reply had arrived
        (:mod:`actae.adapters.persistence.lost_replies`, docs/lost-replies.md).

        A version whose predecessor the store does not hold is refused by the statement
        itself, which then writes nothing: :class:`~actae.adapters.persistence.
        predecessors.PredecessorMissing`. So is a write for a run of ``owners`` whose key
        was forgotten, or that has a key while ``in_clear`` (the contents go unsealed):
        :func:`~actae.adapters.persistence.forgets.refuse_keyed`.
        """
        if not stored_events:
            return None
        if len(stored_events) > BLOCK:
            msg = (
                f"{len(stored_events)} events in one write: at most {BLOCK} (a block of positions)"
            )
            raise ProgrammingError(msg)
        owners = kwargs.get("owners", ())  # sorted, unique: the service's
        in_clear = bool(kwargs.get("in_clear", False))  # the contents go unsealed
        # The key guard's, after the rows: the owners as array text, which the statement casts,
        # because adapting a list of UUIDs costs more client work than the rest of the row
        # (32 hex digits are a UUID's text too, and cheaper to make than its hyphenated form).
        guard = ("{" + ",".join([f"{owner.int:032x}" for owner in owners]) + "}", in_clear)
        count = len(stored_events)
        try:
            # To libpq directly (:meth:`_write_rows`): not a write of arrays, nor one with
            # the test hook, nor an async caller's.
            direct = (
                count <= MAX_VALUES_ROWS
                and self.before_commit is None
                and self._uuid_ids
                and not (self.async_pool is not None and in_portal() and self._on_pool_loop())
            )
            positions = self._write_rows(stored_events, guard) if direct else None
            if positions is None:
                rows = self._insert_rows(
                    self.insert_statement(count), insert_params(stored_events, guard)
                )
                positions = [row[0] for row in rows]
        except TRANSIENT_ERRORS:
            statement = self.insert_statement(count)
            params = insert_params(stored_events, guard)
            positions = self._insert_again(stored_events, statement, params)
        if owners and not positions:  # a guard refused: was it the key guard?
            refuse_keyed(self._execute(self._keys_query(), [owners]), in_clear=in_clear)
        if len(positions) != count:  # the guard drew no block: nothing written
            orphan = first_orphan(stored_events, self._holds_version_before) or stored_events[0]
            raise PredecessorMissing(orphan.originator_id, orphan.originator_version)
        return positions

    def _insert_rows(self, statement: LiteralString, params: list[Any]) -> list[tuple[Any, ...]]:
        """The insert through psycopg, or held open for the test hook ``before_commit``."""
        if self.before_commit is None:
            return self._execute(statement, params)
        return self._execute_then_commit(statement, params, self.before_commit)

    def _write_rows(
        self, stored_events: Sequence[StoredEvent], guard: tuple[str, bool]
    ) -> list[int] | None:
        """The insert sent as libpq's ``PQexecPrepared``, its parameters in wire formats.

        psycopg's public libpq layer (``psycopg.pq``) with the parameters made here costs a
        quarter of the client instructions of a cursor's ``execute`` (which dumps them
        through its adapters and waits in Python); libpq waits with the GIL released (so
        a signal is handled once the statement returns, within the lock timeout at most).
        ``None``: the connection taken does not talk UTF-8, which the text values are in
        (a ``client_encoding`` in the URL's options, or the database's), so psycopg sends.
        """
        values: list[bytes | None] = []
        for e in stored_events:
            key = getattr(e, "operation_id", None)  # a StoredRecord's
            originator = e.originator_id
            values += (
                (originator if isinstance(originator, UUID) else UUID(originator)).int.to_bytes(16),
                INT8.pack(e.originator_version),
                e.topic.encode(),
                e.state,
                None if key is None else key.encode(),
            )
        owners, in_clear = guard
        values += (owners.encode(), b"t" if in_clear else b"f")
        result = self._on_libpq(len(stored_events), values)
        if result is None:
            return None
        # A position is never NULL (the column's constraint).
        cell = result.get_value
        return [INT8.unpack(cell(row, 0))[0] for row in range(result.ntuples)]  # type: ignore[arg-type]

    def _on_libpq(self, count: int, values: list[bytes | None]) -> PGresult | None:
        """Run the insert of ``count`` events on a pooled connection, prepared on demand.

        A connection that does not know the statement (a new one, or one that ``DISCARD
        ALL`` or a pooler in front reset) refuses it without running it; it is prepared
        there and sent again. Nothing is remembered per connection, so nothing can be stale.
        """
        name, text, formats = self._direct_statement(count)
        conn = self._checked_out()
        try:
            pgconn = conn.pgconn
            if pgconn.parameter_status(b"client_encoding") != b"UTF8":
                return None
            result: PGresult = pgconn.exec_prepared(name, values, formats, BINARY)
            if result.status != ExecStatus.TUPLES_OK:
                if result.error_field(DiagnosticField.SQLSTATE) == UNKNOWN_STATEMENT:
                    succeeded(pgconn.prepare(name, text), pgconn)
                    result = pgconn.exec_prepared(name, values, formats, BINARY)
                succeeded(result, pgconn)
            return result
        except psycopg.Error as error:
            raise self._failed(conn, error) from error
        finally:
            self.kept.give_back(conn)

    def _direct_statement(self, count: int) -> tuple[bytes, bytes, Sequence[int]]:
        """The insert of ``count`` events as libpq takes it: name, text (``$n``), formats."""
        found = self._direct.get(count)
        if found is None:
            statement = self.insert_statement(count)
            pieces = statement.split("%s")
            formats = (*ROW_FORMATS * count, TEXT, TEXT)
            if "%%" in statement or len(pieces) - 1 != len(formats):  # pragma: no cover
                raise ProgrammingError(f"the insert of {count} does not take {len(formats)} values")
            text = "".join(f"{piece}${n}" for n, piece in enumerate(pieces[:-1], 1)) + pieces[-1]
            # Named by its text too: a connection another store's recorder used holds its own.
            digest = hashlib.sha256(text.encode()).hexdigest()[:12]
            found = (f"actae_insert_{count}_{digest}".encode(), text.encode(), formats)
            self._direct[count] = found
        return found

    def _holds_version_before(self, event: StoredEvent) -> bool:
        """Whether the table holds the version before ``event``'s (asked after a refusal)."""
        query = (
            SQL("SELECT 1 FROM {table} WHERE originator_id = %s AND originator_version = %s")
            .format(table=self._table)
            .as_string()
        )
        return bool(self._execute(query, [event.originator_id, event.originator_version - 1]))

    def _keys_query(self) -> LiteralString:
        """The key rows of the runs given (an array): each run id, and whether it is forgotten."""
        return (
            SQL("SELECT run_id, wrapped IS NULL FROM {keys} WHERE run_id = ANY(%s::uuid[])")
            .format(keys=self._keys)
            .as_string()
        )

    @retried_on_connection_errors
    def select_events(
        self,
        originator_id: UUID | str,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
    ) -> Sequence[StoredEvent]:
        """Events of one aggregate, as eventsourcing's recorder selects them."""
        shape = (gt is not None, lte is not None, desc, limit is not None)
        params = [originator_id, *(p for p in (gt, lte, limit) if p is not None)]
        rows = self._execute(self._read_query(shape), params)
        return [stored_event(*row[:4]) for row in self._observed(rows)]

    @retried_on_connection_errors
    def select_together(self, requests: Sequence[Request]) -> list[list[StoredEvent]]:
        """Several aggregates' events in one round trip, one list per request, in order.

        Each request is ``(originator_id, last_only)``: the aggregate's last event, or all
        of its events; or an operation (``OperationRows``): its aggregate's events, or else
        the row that carries its id. A worker's step needs its run, its channel's head and
        its operation record; asked separately, those are three round trips before the step
        can start.
        """
        shape: tuple[bool | None, ...] = tuple(
            None if isinstance(request, OperationRows) else request[1] for request in requests
        )
        params: list[Any] = []
        for request in requests:
            if isinstance(request, OperationRows):
                params += [request.aggregate_id, request.operation_id, request.aggregate_id]
            else:
                params.append(request[0])
        rows = self._observed(self._execute(self._together_query(shape), params, binary=True))
        found: list[list[StoredEvent]] = [[] for _ in requests]
        for index, *row in sorted(rows, key=lambda row: (row[0], row[2])):
            found[index].append(stored_event(*row[:4]))
        return found

    def _observed(self, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """``rows``, whose last column is the forget token: told to :attr:`forgets`."""
        if rows:
            self.forgets.observe(rows[0][-1])
        return rows

    @retried_on_connection_errors
    def select_notifications(
        self,
        start: int | None,
        limit: int,
        stop: int | None = None,
        topics: Sequence[str] = (),
        *,
        inclusive_of_start: bool = True,
    ) -> Sequence[Notification]:
        """Events in global order from ``start`` (as eventsourcing's recorder selects them).

        Subscriptions, ``Store.events(None)`` and the projector page through the store with
        it; one rendered statement per shape, like the other reads.
        """
        lower = start if start is not None else 0
        if start is not None and not inclusive_of_start:
            lower += 1
        upper = stop if stop is not None else 2**63 - 1
        horizon = self.horizon()
        known, new = horizon.bound_for(lower)
        found: list[Notification] = []
        if lower <= min(upper, known):
            found = self._notifications_between(lower, min(upper, known), topics, limit)
        if new or len(found) == limit or upper <= known:
            return found
        lower = max(lower, known + 1)
        final = horizon.advance()
        if lower <= min(upper, final):
            found += self._notifications_between(
                lower, min(upper, final), topics, limit - len(found)
            )
        return found

    def _notifications_between(
        self, lower: int, upper: int, topics: Sequence[str], limit: int
    ) -> list[Notification]:
        """Events at positions from ``lower`` to ``upper``, in order, at most ``limit``."""
        params: list[Any] = [lower, upper]
        if topics:
            params.append(list(topics))
        params.append(limit)
        query = self._notifications_query(bool(topics))
        rows = self._observed(self._execute(query, params, binary=True))  # no bytea to unescape
        return [
            Notification(
                id=row[0],
                originator_id=row[1],
                originator_version=row[2],
                topic=row[3],
                state=bytes(row[4]),
            )
            for row in rows
        ]

    @retried_on_connection_errors
    def max_notification_id(self) -> int | None:
        """The newest event's global position below which every event is final, or ``None``.

        Writes in flight are waited for (:class:`~actae.adapters.persistence.positions.
        Horizon`): a position returned here is never followed by an event below it.
        """
        final = self.horizon().advance()
        rows = self._execute(self._max_position, [final])
        return rows[0][0] if rows else None

    def horizon(self) -> Horizon:
        """How far positions are final (the events table must exist)."""
        if self._horizon is None:
            self._horizon = Horizon(self._execute, self.sequence(), self._table.as_string())
        return self._horizon

    def sequence(self) -> str:
        """The qualified name of the events table's sequence, as PostgreSQL quotes it.

        Refused if the sequence caches values: a session would then hold values drawn long
        before it uses them, and the horizon's argument needs each value drawn by the write
        that uses it.
        """
        if self._sequence is None:
            table = self._table.as_string()
            rows = self._execute(
                # Qualified whatever the session's search path (regclass::text would leave
                # the schema out where the path already names it).
                "SELECT format('%%I.%%I', n.nspname, c.relname), s.seqcache FROM pg_sequence s"
                " JOIN pg_class c ON c.oid = s.seqrelid"
                " JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE s.seqrelid = pg_get_serial_sequence(%s, 'notification_id')::regclass",
                [table],
            )
            name, cache = rows[0]
            if cache != 1:
                msg = (
                    f"the sequence {name} of {table} caches {cache} values: Actae's positions "
                    f"need CACHE 1 (ALTER SEQUENCE {name} CACHE 1)"
                )
                raise ProgrammingError(msg)
            self._sequence = str(name)
        return self._sequence

    def _notifications_query(self, has_topics: bool) -> LiteralString:
        """The global-order SELECT, with or without a topic filter."""
        rendered = self._notifications.get(has_topics)
        if rendered is None:
            statement = SQL(
                "SELECT notification_id, originator_id, originator_version, topic, state, {token}"
                " FROM {table} WHERE notification_id >= %s AND notification_id <= %s"
            ).format(table=self._table, token=self._token)
            if has_topics:
                statement += SQL(" AND topic = ANY(%s)")
            statement += SQL(" ORDER BY notification_id LIMIT %s")
            rendered = self._notifications[has_topics] = statement.as_string()
        return rendered

    def _together_query(self, shape: tuple[bool | None, ...]) -> LiteralString:
        """One ``UNION ALL`` branch per request, tagged with the request's index.

        ``None`` in ``shape`` is an operation: its aggregate's rows, and the row carrying
        its id if that is another aggregate's (only one of the two can exist).
        """
        rendered = self._together.get(shape)
        if rendered is None:
            branch = SQL(
                "(SELECT {index}, originator_id, originator_version, topic, state, {token}"
                " FROM {table} WHERE {where})"
            )
            branches = [
                branch.format(
                    index=Literal(index), table=self._table, where=SQL(where), token=self._token
                )
                for index, last in enumerate(shape)
                for where in TOGETHER_WHERE[last]
            ]
            rendered = self._together[shape] = SQL(" UNION ALL ").join(branches).as_string()
        return rendered

    def query(self, statement: LiteralString, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement of another part of the store (the clock) the way writes run."""
        return self._execute(statement, params)

    def _execute(
        self, query: LiteralString, params: Sequence[Any], *, binary: bool = False
    ) -> list[tuple[Any, ...]]:
        """Run one prepared statement on a pooled connection's own cursor; its rows.

        Checks the connection out and back in directly (no context managers: this is every
        write's path). Errors become eventsourcing's, as in its ``get_connection``; a
        broken connection goes back to the pool, which discards it. ``binary``: the rows
        come in PostgreSQL's binary format, which spares the client parsing UUIDs from text
        and unescaping ``bytea`` (a quarter of a combined read's client instructions).
        """
        if self.async_pool is not None and in_portal() and self._on_pool_loop():
            return awaiting(self._execute_async(query, params, binary=binary))
        conn = self._checked_out()
        try:
            cursor = self._cursors.get(conn)
            if cursor is None or cursor.closed:
                cursor = self._cursors[conn] = conn.cursor(row_factory=tuple_row)
            return cursor.execute(query, params, prepare=True, binary=binary).fetchall()
        except psycopg.Error as error:
            raise self._failed(conn, error) from error
        finally:
            self.kept.give_back(conn)

    def _checked_out(self) -> Any:
        """A pooled connection for one statement: the kept one if any (opens the pool once)."""
        if not self._pool_opened:
            with self.datastore.get_connection():  # opens the pool, with its settings
                self._pool_opened = True
        try:
            return self.kept.take()
        except psycopg.Error as error:
            raise translated(error) from error

    def _failed(self, conn: Any, error: psycopg.Error) -> PersistenceError:
        """What a statement's ``error`` on ``conn`` raises, once ``conn`` is dealt with.

        A broken connection goes back to the pool, which discards it.
        """
        if conn.closed:  # the server dropped it: its idle siblings are most likely dead too
            self._discard_dead_connections()
        elif isinstance(error, psycopg.errors.ReadOnlySqlTransaction):
            conn.close()  # perhaps a standby's session: the pool connects anew
        return translated(error)

    def _execute_then_commit(
        self, query: LiteralString, params: Sequence[Any], before_commit: Any
    ) -> list[tuple[Any, ...]]:
        """:meth:`_execute` in an explicit transaction, calling ``before_commit`` before its end.

        Only for tests: it holds a write's positions uncommitted for as long as the hook
        takes, as a slow network or a stalled server would.
        """
        conn = self.kept.take()
        try:
            with conn.transaction():
                rows: list[tuple[Any, ...]] = (
                    conn.cursor(row_factory=tuple_row).execute(query, params).fetchall()
                )
                before_commit()
            return rows
        except psycopg.Error as error:
            raise translated(error) from error
        finally:
            self.kept.give_back(conn)

    def _on_pool_loop(self) -> bool:
        """Whether the running loop is the async pool's (another loop cannot use it)."""
        return asyncio.get_running_loop() is self._async_loop

    async def _execute_async(
        self, query: LiteralString, params: Sequence[Any], *, binary: bool = False
    ) -> list[tuple[Any, ...]]:
        """:meth:`_execute` for a caller in a portal: the coroutine waits, not the thread."""
        assert self.async_pool is not None  # noqa: S101 - only called once attached
        try:
            async with self.async_pool.connection() as conn:
                cursor = conn.cursor(row_factory=tuple_row)
                try:
                    await cursor.execute(query, params, prepare=True, binary=binary)
                except psycopg.errors.ReadOnlySqlTransaction:
                    await conn.close()  # perhaps a standby's session: the pool connects anew
                    raise
                rows: list[tuple[Any, ...]] = await cursor.fetchall()
                return rows
        except psycopg.Error as error:
            if conn_broken(error):  # its idle siblings are most likely dead too
                with contextlib.suppress(psycopg.Error):  # still down: the retries wait for it
                    await self.async_pool.check()
            raise translated(error) from error

    def _discard_dead_connections(self) -> None:
        """Test the pool's idle connections and replace the dead ones.

        After a restart every idle connection is dead, and the pool hands them out one by
        one; with a large pool a statement's retries could all land on dead connections
        although the server is back.
        """
        self.kept.release()
        with contextlib.suppress(psycopg.Error):  # still down: the retries wait for it
            self.datastore.pool.check()

    def create_table(self) -> None:
        """The store's tables, as its migrations make them (never eventsourcing's DDL)."""
        arguments = self.datastore.pool.kwargs
        assert isinstance(arguments, dict)  # noqa: S101 - eventsourcing builds it as a dict
        conninfo = {k: v for k, v in arguments.items() if k != "row_factory"}
        with psycopg.connect(**conninfo, autocommit=True) as conn:
            migrate_postgres(conn, self.datastore.schema, DEFAULT_LOCK_WAIT)

    def close(self) -> None:
        """Hand the kept connection back and close the pool."""
        self.kept.release()
        self.datastore.close()

    def insert_statement(self, count: int) -> LiteralString:
        """The insert of ``count`` events, in a block of positions of its own.

        One value of the table's sequence, drawn once per statement, gives the events
        ``block * BLOCK`` to ``block * BLOCK + count - 1``
        (:mod:`actae.adapters.persistence.positions`). Up to ``MAX_VALUES_ROWS`` events it
        is a ``VALUES`` list of scalars (cheaper to adapt than arrays, and rendered once per
        count); beyond, four array parameters.
        """
        rendered = self._writes.get(count)
        if rendered is None:
            id_type = Identifier(self.datastore.originator_id_type)
            source: Composable
            if count <= MAX_VALUES_ROWS:
                rows = [
                    SQL(VALUES_ROW).format(id_type=id_type, ordinal=Literal(ordinal))
                    for ordinal in range(count)
                ]
                source = SQL("VALUES {rows}").format(rows=SQL(", ").join(rows))
            else:
                source = SQL(UNNEST_ROWS).format(id_type=id_type)
            rendered = (
                SQL(
                    "WITH e (originator_id, originator_version, topic, state, operation_id,"
                    " ordinal) AS MATERIALIZED ({source}), "
                    "block AS MATERIALIZED"
                    " (SELECT nextval({sequence}::regclass) * {size} AS first"
                    " WHERE NOT EXISTS ({orphans})"
                    " AND NOT EXISTS (SELECT FROM {keys} WHERE run_id = ANY(%s::uuid[])"
                    " AND (wrapped IS NULL OR %s::boolean))), "
                    "inserted AS ("
                    " INSERT INTO {table} (notification_id, originator_id,"
                    " originator_version, topic, state, operation_id)"
                    " SELECT block.first + e.ordinal{shift},"
                    " e.originator_id, e.originator_version, e.topic, e.state, e.operation_id"
                    " FROM block, e"
                    " RETURNING notification_id) "
                    "SELECT notification_id AS written_position FROM inserted"
                    " ORDER BY notification_id"
                )
                .format(
                    sequence=Literal(self.sequence()),
                    size=Literal(BLOCK),
                    keys=self._keys,
                    table=self._table,
                    shift=SQL("" if count <= MAX_VALUES_ROWS else " - 1"),
                    source=source,
                    orphans=SQL(ORPHANS).format(table=self._table),
                )
                .as_string()
            )
            if count <= MAX_VALUES_ROWS:
                self._writes[count] = rendered
        return rendered

    def _read_query(self, shape: ReadShape) -> LiteralString:
        """The SELECT for one query shape, rendered on first use."""
        rendered = self._reads.get(shape)
        if rendered is None:
            has_gt, has_lte, desc, has_limit = shape
            statement = SQL(
                "SELECT originator_id, originator_version, topic, state, {token} FROM {table}"
                " WHERE originator_id = %s"
            ).format(table=self._table, token=self._token)
            if has_gt:
                statement += SQL(" AND originator_version > %s")
            if has_lte:
                statement += SQL(" AND originator_version <= %s")
            if desc:
                statement += SQL(" ORDER BY originator_version DESC")
            else:
                statement += SQL(" ORDER BY originator_version ASC")
            if has_limit:
                statement += SQL(" LIMIT %s")
            rendered = self._reads[shape] = statement.as_string()
        return rendered


# -- the database's clock ------------------------------------------------------------------
#
# A PostgreSQL store runs on its server's clock (docs/time.md): read here, beside the
# recorder whose pool takes the readings once the store is open, so a write's time is no
# detour. This host's wall clock is read through ``clocks.wall_clock`` (patched by tests).

RESAMPLE_EVERY = 30.0
"""Seconds between two readings of the database's clock."""
RESAMPLE_AFTER_FAILURE = 1.0
"""Seconds before trying again when the database could not be read (it may be failing over)."""
SAMPLE_CONNECT_TIMEOUT = 5
"""Seconds the first reading may wait for a connection before it counts as failed."""


@dataclass(frozen=True)
class Reading:
    """One reading of the database's clock, pinned to this process's monotonic clock.

    ``database`` is the server's time at ``monotonic`` (the middle of the round trip, so it
    is off by at most half of ``round_trip``); ``skew`` is how far the database's clock is
    ahead of this host's wall clock, in seconds.
    """

    database: datetime
    monotonic: float
    round_trip: float
    skew: float

    def now(self) -> datetime:
        """The database's time now, extrapolated on the monotonic clock."""
        return self.database + timedelta(seconds=time.monotonic() - self.monotonic)


def read_database_clock(conninfo: Mapping[str, str], tries: int = 3) -> Reading:
    """Ask the server for ``clock_timestamp()`` and time the round trip.

    The answer was produced somewhere inside the round trip; taking its middle bounds the
    error by half the round trip (well under a millisecond on a LAN), whatever either
    host's wall clock says. Of a few tries the shortest round trip wins, so a busy moment
    on either host does not widen the bound.
    """
    options: dict[str, Any] = {"connect_timeout": SAMPLE_CONNECT_TIMEOUT, **conninfo}
    with psycopg.connect(**options, autocommit=True) as conn:
        conn.execute("SELECT 1")  # the first statement on a connection pays for set-up

        def execute(statement: LiteralString, params: Sequence[Any]) -> list[tuple[Any, ...]]:
            return conn.execute(statement, params).fetchall()

        return read_clock_through(execute, tries)


def read_clock_through(execute: Execute, tries: int = 3) -> Reading:
    """:func:`read_database_clock` through ``execute`` (a pooled connection, already set up)."""
    readings = [_one_reading(execute) for _ in range(tries)]
    return min(readings, key=lambda reading: reading.round_trip)


def _one_reading(execute: Execute) -> Reading:
    wall_before, before = clocks.wall_clock(), time.monotonic()
    rows = execute("SELECT clock_timestamp()", ())
    after, wall_after = time.monotonic(), clocks.wall_clock()
    if not rows or not isinstance(rows[0][0], datetime):
        raise psycopg.DataError("clock_timestamp() returned no timestamp")
    database = rows[0][0].astimezone(UTC)
    wall_middle = wall_before + (wall_after - wall_before) / 2
    return Reading(
        database=database,
        monotonic=(before + after) / 2,
        round_trip=after - before,
        skew=(database - wall_middle).total_seconds(),
    )


class DatabaseClock(SampledClock):
    """The PostgreSQL server's clock, read once per :data:`RESAMPLE_EVERY` seconds.

    Between readings time moves on this process's monotonic clock, so asking the time costs
    nothing and a jump of the host's wall clock changes nothing. A background thread takes
    the readings; while the database cannot be reached it keeps the last one and tries
    again every :data:`RESAMPLE_AFTER_FAILURE` seconds, so the first reading after an outage
    (possibly from a promoted replica with its own clock) comes right after a reconnect.
    """

    def __init__(
        self, conninfo: Mapping[str, str], *, resample_every: float = RESAMPLE_EVERY
    ) -> None:
        self._conninfo = dict(conninfo)
        self._resample_every = resample_every
        self.reading = read_database_clock(self._conninfo)  # opening fails if it cannot
        self._read: Callable[[], Reading] = lambda: read_database_clock(self._conninfo)
        self._latest = self.reading.now()
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._sampler = threading.Thread(
            target=self._keep_reading, name="actae database clock", daemon=True
        )
        self._sampler.start()

    def __call__(self) -> datetime:
        """The database's time now; never earlier than a time it gave before.

        A new reading can land a few milliseconds behind the last one (or more, after a
        failover to a server with its own clock); lease and timer arithmetic must not see
        time run backwards.
        """
        now = self.reading.now()
        with self._lock:
            if now < self._latest:
                return self._latest
            self._latest = now
        return now

    @property
    def skew(self) -> float:
        """Seconds the database's clock is ahead of this host's (negative: behind)."""
        return self.reading.skew

    def read_through(self, execute: Execute) -> None:
        """Take the next readings through ``execute``, the store's pool.

        Not a connection of their own: the connection the store keeps when idle serves them.
        """
        self._read = lambda: read_clock_through(execute)

    def close(self) -> None:
        """Stop reading the database's clock; the time goes on from the last reading."""
        self._closed.set()

    def _keep_reading(self) -> None:
        pause = self._resample_every
        while not self._closed.wait(pause):
            try:
                self.reading = self._read()
                pause = self._resample_every
            except (psycopg.Error, OSError, PersistenceError):  # an outage: keep the last one
                pause = RESAMPLE_AFTER_FAILURE
