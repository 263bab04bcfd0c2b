"""The event store on each kind of database, built by name: which recorder, on which datastore.

No topic strings or settings dictionaries in between: a write can be followed by reading.
Each setting is eventsourcing's default unless a comment says why Actae's differs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from eventsourcing.persistence import ApplicationRecorder, Mapper
from eventsourcing.postgres import ConnectionPool, PostgresDatastore
from eventsourcing.sqlite import SQLiteDatastore
from psycopg import Connection
from psycopg.rows import DictRow

from actae.adapters.persistence.eventlog import PostgresEventLog, RecordedEventLog
from actae.adapters.persistence.offloaded import ActaeSQLiteRecorder
from actae.adapters.persistence.postgres import ActaePostgresRecorder
from actae.adapters.persistence.url import StoreUrl

POSTGRES_EVENTS_TABLE = "actae_events"
"""The stored events' table on PostgreSQL (eventsourcing's name for an application "actae")."""
SQLITE_LOCK_TIMEOUT = 30
"""Seconds a SQLite writer waits for another's lock before giving up."""
POSTGRES_LOCK_TIMEOUT = 10
"""Seconds a PostgreSQL statement waits for a lock before giving up (0 would wait forever)."""
IDLE_IN_TRANSACTION_TIMEOUT = 5
"""Seconds a session may sit idle inside a transaction before the server ends it."""
IDLE_CONNECTION_SECONDS = 10.0
"""Seconds a pooled connection beyond the first may stay unused before it is closed."""


@dataclass(frozen=True)
class EventStore:
    """Where a store's events live: the recorder writes, the domain reads through the log."""

    mapper: Mapper[Any]
    recorder: ApplicationRecorder
    log: RecordedEventLog
    close: Callable[[], None]
    metadata_mapper: Mapper[Any]
    """Decodes events for the read models: contents it may not reveal stay closed."""


Mappers = Callable[[ApplicationRecorder], tuple[Mapper[Any], Mapper[Any]]]
"""Makes the mappers over a recorder: the full one, and the read models' one."""


def sqlite_store(database: str, *, create_tables: bool, mappers: Mappers) -> EventStore:
    """Events in the SQLite ``database`` (a path or a URI; table ``stored_events``)."""
    datastore = SQLiteDatastore(
        db_name=database,
        lock_timeout=SQLITE_LOCK_TIMEOUT,
        # A connection is held while its writer waits for the file lock: waiting for a
        # connection is waiting for that lock, and deserves the same patience.
        pool_timeout=SQLITE_LOCK_TIMEOUT,
    )
    recorder = ActaeSQLiteRecorder(datastore)
    if create_tables:
        recorder.create_table()
    return _assembled(recorder, RecordedEventLog, datastore.close, mappers)


def postgres_store(url: StoreUrl, *, create_tables: bool, mappers: Mappers) -> EventStore:
    """Events in PostgreSQL, in the URL's schema, through a pool of the URL's size."""
    conninfo = url.postgres_conninfo
    datastore = PostgresDatastore(
        dbname=conninfo["dbname"],
        host=conninfo["host"],
        port=conninfo["port"],
        user=conninfo["user"],
        password=conninfo.get("password", ""),
        connect_timeout=url.pool_timeout,  # how long a checkout waits for a connection
        idle_in_transaction_session_timeout=IDLE_IN_TRANSACTION_TIMEOUT,
        pool_size=url.pool_size,
        max_overflow=url.max_overflow,
        lock_timeout=POSTGRES_LOCK_TIMEOUT,
        schema=url.postgres_schema,
        enable_db_functions=False,  # its stored functions take a table lock per write
    )
    datastore.pool = process_pool(datastore, conninfo)
    recorder = ActaePostgresRecorder(datastore, events_table_name=POSTGRES_EVENTS_TABLE)
    if create_tables:
        recorder.create_table()
    return _assembled(recorder, PostgresEventLog, recorder.close, mappers)


def process_pool(
    datastore: PostgresDatastore, conninfo: dict[str, str]
) -> ConnectionPool[Connection[DictRow]]:
    """The one pool of the store's connections (events, read models, leases, custody, clock).

    eventsourcing's pool, every libpq parameter of the URL included, except that an idle
    process holds one connection and one thread, and that every session looks in the store's
    schema first (the read models name their tables unqualified).
    """
    stock = datastore.pool
    assert isinstance(stock.kwargs, dict)  # noqa: S101 - eventsourcing builds it as a dict
    arguments = dict(stock.kwargs)
    arguments.update(conninfo)
    if not arguments.get("password"):
        arguments.pop("password", None)
    # The store's schema first (the read models name their tables unqualified), then
    # public, where extensions and the database's own functions live.
    path = ",".join(dict.fromkeys((datastore.schema, "public")))
    options = f"{arguments.get('options', '')} -c search_path={path}"
    arguments["options"] = options.strip()
    return ConnectionPool(
        connection_class=stock.connection_class,
        kwargs=arguments,
        min_size=1,
        max_size=stock.max_size,
        open=False,
        configure=datastore.after_connect_func(),
        timeout=stock.timeout,
        max_waiting=stock.max_waiting,
        max_lifetime=stock.max_lifetime,
        max_idle=IDLE_CONNECTION_SECONDS,
        num_workers=1,
        name="actae",
    )


def _assembled(
    recorder: Any, log: type[RecordedEventLog], close: Callable[[], None], mappers: Mappers
) -> EventStore:
    """The parts around ``recorder``, with the mappers ``mappers`` makes for it."""
    mapper, metadata_mapper = mappers(recorder)
    return EventStore(mapper, recorder, log(mapper, recorder), close, metadata_mapper)
