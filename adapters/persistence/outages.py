"""Riding out database outages: which errors pass by themselves, and how long to wait them out.

A PostgreSQL restart, a failover, a pooler restart or a terminated backend drops connections
for a few seconds. The long-running processes (worker, projector, subscriptions) must wait
that out and carry on from their durable positions, and say so once, not once per attempt.
A server that turns read-only (a failover to a standby, ``default_transaction_read_only``
turned on) is an outage too: reads still work, but no write can succeed until a writable
server is back, and ending the processes would leave their runs with nobody to serve them.
Everything else must fail fast: retrying a missing table, a permission error or bad input
forever hides the real problem behind a loop of log lines.

Retries use tenacity (exponential backoff with jitter, so processes that lost the server
together do not come back in lockstep); the classification below is the one place that says
what is worth retrying.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypedDict, TypeVar, Unpack

import psycopg
from eventsourcing.persistence import PersistenceError
from psycopg_pool import PoolClosed
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_before_delay,
    stop_never,
    wait_random_exponential,
)

from actae.adapters.persistence.awaiting import pause
from actae.domain.errors import ValidationError

T = TypeVar("T")

READ_ONLY = "25006"
"""read_only_sql_transaction: the server refuses writes (a standby, or read-only by default).

An analyst's query that tries to write meets the same SQLSTATE inside the read-only
transaction it is run in; that one is bad input, answered as a ``ValidationError`` (never
waited out: see :func:`is_transient`)."""

TRANSIENT_SQLSTATES = frozenset(
    {
        "40001",  # serialization_failure
        "40P01",  # deadlock_detected
        "57P01",  # admin_shutdown: the server is stopping or the backend was terminated
        "57P02",  # crash_shutdown: another backend crashed, the server restarts
        "57P03",  # cannot_connect_now: the server is starting up or in recovery
        "53300",  # too_many_connections: a restart's reconnect storm
        READ_ONLY,
    }
)
"""SQLSTATEs that a later attempt can succeed after; class 08 (connection exception) too."""

REFUSED_LOGIN = (
    "authentication",
    "pg_hba.conf",
    "does not exist",
    "SSL",
    "certificate",
)
"""Words of a connection the server refused for good (a bad password, no such database or
role, no TLS where it is required): libpq reports these without a SQLSTATE, like a
refused or reset connection, but waiting cannot make them succeed."""

FIRST_WAIT = 0.05
MAX_WAIT = 2.0
"""Seconds between attempts: a random wait (full jitter) under a bound that starts at
``FIRST_WAIT`` and doubles up to ``MAX_WAIT`` (a restarted server is usually back within a
few of these)."""


def is_transient(error: BaseException) -> bool:
    """Whether ``error`` (or the error it was raised from) goes away by waiting.

    SQLite's only transient error is a lock held too long by another process. Bad input is
    never waited out, whatever the database said when it was found out (a write in a
    read-only query is refused with the SQLSTATE of a read-only server).
    """
    for current in _chain(error):
        if isinstance(current, ValidationError):
            return False
        if isinstance(current, psycopg.Error):
            return _psycopg_transient(current)
        if isinstance(current, sqlite3.OperationalError):
            return "locked" in str(current) or "busy" in str(current)
        if isinstance(current, ConnectionError):
            return True
    return False


def refuses_writes(error: BaseException) -> bool:
    """Whether ``error`` (or the error it was raised from) is a server that is read-only."""
    return any(
        isinstance(current, psycopg.Error) and current.sqlstate == READ_ONLY
        for current in _chain(error)
    )


def _chain(error: BaseException) -> Iterator[BaseException]:
    """``error``, then the error it was raised from, and so on (each once)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _psycopg_transient(error: psycopg.Error) -> bool:
    """A psycopg error without a SQLSTATE never reached the server's SQL layer.

    The connection was refused, reset or closed, or the pool had none to give, unless the
    server refused the login itself (``REFUSED_LOGIN``) or the pool was closed by its owner.
    """
    if isinstance(error, PoolClosed):
        return False  # closed by its owner, not by the database: waiting cannot help
    state = error.sqlstate
    if state is not None:
        return state in TRANSIENT_SQLSTATES or state.startswith("08")
    if any(words in str(error) for words in REFUSED_LOGIN):
        return False
    return isinstance(error, psycopg.OperationalError | psycopg.InterfaceError)


def store_outage(error: BaseException) -> bool:
    """Whether ``error`` is an outage of Actae's own store, not of something a workflow uses.

    Workflow code talks to the store through its recorder, whose errors are eventsourcing's
    ``PersistenceError`` family; a refused connection to a model provider, or a deadlock in
    the workflow's own database, is the run's error to fail with, not an outage to wait out.
    """
    return isinstance(error, PersistenceError) and is_transient(error)


def missing_table(error: BaseException) -> bool:
    """Whether ``error`` (or its cause) is a table that does not exist: no Actae store there."""
    return any(isinstance(current, psycopg.errors.UndefinedTable) for current in _chain(error))


def summary(error: BaseException) -> str:
    """The first line of an error's message, with its type: enough for a log line."""
    first = (str(error).strip().splitlines() or [""])[0]
    return f"{type(error).__name__}: {first}" if first else type(error).__name__


class Outage:
    """Says once that the database went away, and once that it is back, with the duration.

    ``say`` gets each line; the outage starts at the first failed attempt and ends at the
    first success after it.
    """

    def __init__(self, who: str, say: Callable[[str], None]) -> None:
        self._who = who
        self._say = say
        self._since: float | None = None
        self._lock = threading.Lock()  # a worker's heartbeat shares its outage log
        self.count = 0
        self.last_duration: float | None = None

    @property
    def ongoing(self) -> bool:
        """Whether the database is unreachable as far as this process last saw."""
        return self._since is not None

    def began(self, error: BaseException) -> None:
        """An attempt failed with a transient error (logged at the outage's first one)."""
        with self._lock:
            first = self._since is None
            if first:
                self._since = time.monotonic()
                self.count += 1
        if first:
            state = "is read-only" if refuses_writes(error) else "unreachable"
            self._say(f"{self._who}: database {state} ({summary(error)}); retrying")

    def ended(self) -> None:
        """An attempt succeeded: log the recovery if there was an outage."""
        with self._lock:
            since, self._since = self._since, None
        if since is not None:
            self.last_duration = time.monotonic() - since
            self._say(f"{self._who}: database back after {self.last_duration:.1f} s")


class RetryOptions(TypedDict, total=False):
    """How :func:`retrying` retries (every option may be left out)."""

    give_up: Callable[[], bool]
    """Stop retrying (re-raising the last error) once it turns true."""
    within: float | None
    """Stop retrying after so many seconds (``None``: never)."""
    sleep: Callable[[float], object]
    before_retry: Callable[[], None] | None
    """Runs before each new attempt (a reconnect, say)."""


def retrying(outage: Outage, **options: Unpack[RetryOptions]) -> Retrying:
    """A tenacity ``Retrying`` that waits out transient errors and re-raises the rest."""
    give_up = options.get("give_up", lambda: False)
    within = options.get("within")
    sleep = options.get("sleep", pause)
    before_retry = options.get("before_retry")

    def note(state: RetryCallState) -> None:
        failure = state.outcome.exception() if state.outcome is not None else None
        if failure is not None:
            outage.began(failure)
        if before_retry is not None:
            before_retry()

    def wait(seconds: float) -> None:
        sleep(seconds)

    return Retrying(
        retry=retry_if_exception(lambda error: is_transient(error) and not give_up()),
        wait=wait_random_exponential(multiplier=FIRST_WAIT, max=MAX_WAIT),
        stop=stop_never if within is None else stop_before_delay(within),
        sleep=wait,
        before_sleep=note,
        reraise=True,
    )


def ride_out(call: Callable[[], T], outage: Outage, **options: Unpack[RetryOptions]) -> T:
    """``call()``, tried again through transient errors (see :func:`retrying`)."""
    for attempt in retrying(outage, **options):
        with attempt:
            result = call()
    outage.ended()
    return result
