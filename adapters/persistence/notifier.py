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
import os
import threading
from typing import Any

import psycopg
from psycopg.sql import SQL, Identifier

log = logging.getLogger("actae.notifier")

INTERVAL = 0.002
"""Seconds between two notifications of one process, at least."""
RECONNECT_AFTER = 1.0
CONNECT_TIMEOUT = 5
"""Seconds a connection attempt may take (unless the store's URL sets its own)."""
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
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._failing = False
        self.sent = 0

    def poke(self) -> None:
        """Ask for a notification soon (starts the thread, again if it died or forked)."""
        thread = self._thread
        if thread is None or not thread.is_alive() or self._pid != os.getpid():
            self._start()
        self._poked.set()

    def close(self) -> None:
        """Stop the thread (a last pending notification is sent first) and disconnect."""
        self._stopped.set()
        self._poked.set()
        thread = self._thread
        if thread is not None and self._pid == os.getpid():
            thread.join(timeout=5)
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def _start(self) -> None:
        with self._lock:
            if self._pid != os.getpid():  # a forked child: the parent's thread and connection
                self._pid, self._conn, self._thread = os.getpid(), None, None  # are not ours
            if self._stopped.is_set() or (self._thread is not None and self._thread.is_alive()):
                return
            self._thread = threading.Thread(target=self._run, name="actae-notifier", daemon=True)
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
            with self._lock:
                if self._stopped.is_set() and self._conn is None:
                    return
                if self._conn is None or self._conn.closed:
                    arguments = {"connect_timeout": CONNECT_TIMEOUT, **self._conninfo}
                    self._conn = psycopg.connect(**arguments, autocommit=True)
                conn = self._conn
            conn.execute(self._statement)
            self.sent += 1
            if self._failing:
                log.info("notifications sent again")
            self._failing = False
        except Exception as error:  # the thread must live on: readers poll meanwhile
            if not self._failing:
                log.warning("notifications not sent (%s); listeners poll meanwhile", error)
            self._failing = True
            with self._lock:
                if self._conn is not None:
                    self._conn.close()
                    self._conn = None
            self._stopped.wait(RECONNECT_AFTER)
