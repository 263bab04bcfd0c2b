"""Riding out database outages: which errors pass by themselves, and how long to wait them out.

The one place that decides (docs/outages.md): a restart, a failover, a terminated backend or
a read-only server is waited out, said once; everything else fails fast.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

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
"""read_only_sql_transaction: the server refuses writes (a standby, or read-only by default)."""

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

REFUSED_LOGIN = ("authentication", "pg_hba.conf", "does not exist", "SSL", "certificate")
"""Words of a login the server refused for good: no SQLSTATE, but waiting cannot help."""

FIRST_WAIT = 0.05
MAX_WAIT = 2.0
"""Seconds between attempts: full jitter under a bound doubling from ``FIRST_WAIT``."""


def is_transient(error: BaseException) -> bool:
    """Whether ``error`` (or the error it was raised from) goes away by waiting.

    Bad input never does, whatever the database said (an analyst's write in a read-only
    query meets the SQLSTATE of a read-only server).
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
    """Transient by SQLSTATE; without one, the connection was lost (unless refused for good)."""
    if isinstance(error, PoolClosed):
        return False  # closed by its owner, not by the database: waiting cannot help
    state = error.sqlstate
    if state is not None:
        return state in TRANSIENT_SQLSTATES or state.startswith("08")
    if any(words in str(error) for words in REFUSED_LOGIN):
        return False
    return isinstance(error, psycopg.OperationalError | psycopg.InterfaceError)


def store_outage(error: BaseException) -> bool:
    """Whether ``error`` is an outage of the store's own recorder, not of a workflow's service.

    A workflow's refused model call or deadlocked database is the run's error to fail with.
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
    """Says once that the database went away, and once that it is back, with the duration."""

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


def ride_out(
    call: Callable[[], T],
    outage: Outage,
    *,
    give_up: Callable[[], bool] = lambda: False,
    within: float | None = None,
    sleep: Callable[[float], object] = pause,
    before_retry: Callable[[], None] | None = None,
) -> T:
    """``call()``, tried again through transient errors; any other error is raised at once.

    Stops retrying (re-raising the last error) once ``give_up()`` turns true, or after
    ``within`` seconds; ``before_retry`` runs before each new attempt (a reconnect, say).
    """

    def note(state: RetryCallState) -> None:
        failure = state.outcome.exception() if state.outcome is not None else None
        if failure is not None:
            outage.began(failure)
        if before_retry is not None:
            before_retry()

    def wait(seconds: float) -> None:
        sleep(seconds)

    for attempt in Retrying(
        retry=retry_if_exception(lambda error: is_transient(error) and not give_up()),
        wait=wait_random_exponential(multiplier=FIRST_WAIT, max=MAX_WAIT),
        stop=stop_never if within is None else stop_before_delay(within),
        sleep=wait,
        before_sleep=note,
        reraise=True,
    ):
        with attempt:
            result = call()
    outage.ended()
    return result
