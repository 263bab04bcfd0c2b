"""Waking readers after writes, from outside every write transaction.

A ``NOTIFY`` inside a write transaction takes a cluster-wide lock at commit that is held
until the commit record is flushed: every such commit in the cluster then waits for the
previous one's flush, and group commit never happens. So writes do not notify. After a
write commits, the writer *pokes* its process's :class:`Notifier`, whose thread sends one
``NOTIFY`` on a connection of its own, a transaction without any write. Pokes that arrive
while a ``NOTIFY`` is being sent, or within ``INTERVAL`` of the last one, are coalesced into
the next: a process sends at most one notification per interval, however many writes it
makes. Listeners re-read the store when woken and poll besides, so a lost notification
(the notifier's connection down) costs latency, never an event.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import psycopg
from psycopg.sql import SQL, Identifier

log = logging.getLogger("actae.notifier")

INTERVAL = 0.002
"""Seconds between two notifications of one process, at least."""
RECONNECT_AFTER = 1.0
"""Seconds before the notifier's connection is opened again after it failed."""


class Notifier:
    """Sends ``NOTIFY channel`` after pokes, coalesced, from a daemon thread."""

    def __init__(self, conninfo: dict[str, Any], channel: str) -> None:
        self._conninfo = conninfo
        self._statement = SQL("NOTIFY {}").format(Identifier(channel))
        self._poked = threading.Event()
        self._stopped = threading.Event()
        self._conn: psycopg.Connection[Any] | None = None
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self.sent = 0

    def poke(self) -> None:
        """Ask for a notification soon (starts the thread on first use)."""
        if self._thread is None:
            self._start()
        self._poked.set()

    def close(self) -> None:
        """Stop the thread (a last pending notification is sent first) and disconnect."""
        self._stopped.set()
        self._poked.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._conn is not None:
            self._conn.close()

    def _start(self) -> None:
        with self._start_lock:
            if self._thread is None and not self._stopped.is_set():
                self._thread = threading.Thread(
                    target=self._run, name="actae-notifier", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        while True:
            self._poked.wait()
            self._poked.clear()
            self._send()
            if self._stopped.is_set():
                return
            self._stopped.wait(INTERVAL)  # pokes meanwhile are coalesced into the next

    def _send(self) -> None:
        try:
            if self._conn is None or self._conn.closed:
                self._conn = psycopg.connect(**self._conninfo, autocommit=True)
            self._conn.execute(self._statement)
            self.sent += 1
        except psycopg.Error as error:
            log.debug("notification not sent (%s): listeners poll meanwhile", error)
            if self._conn is not None:
                self._conn.close()
            self._stopped.wait(RECONNECT_AFTER)
