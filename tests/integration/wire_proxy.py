"""A fault-injecting TCP proxy in front of PostgreSQL, for tests of lost replies and cut links.

Open a store through it (``proxy.url(pg_url)``) and it forwards every byte both ways, until
told otherwise:

* :meth:`WireProxy.drop_next_write_reply` — the server's answer to the next event-store write
  is swallowed (the write itself reaches the server and commits), then both sides of that
  connection are cut. The client sees exactly what a network failure after the commit
  looks like: a connection error, with no way to know the write happened.
* :meth:`WireProxy.cut_all` — every open connection is cut at once (a network blip).
* :meth:`WireProxy.stall` — a black hole: from now on nothing is forwarded either way, on
  open connections and new ones, and nobody is told (no RST, no FIN): each side waits for
  an answer that never comes, as behind a partition. :meth:`WireProxy.heal` ends it; the
  connections that lost bytes to it are cut then (their streams have holes).

A write is recognised by its reply, not by its statement text (prepared statements are
sent by name after their first use): the recorder's insert returns a column named
``written_position``, which appears in the reply's RowDescription. The reply is dropped up to and
including the server's ReadyForQuery, which PostgreSQL sends only after the implicit
transaction committed, so a dropped reply always belongs to a committed write.

Plain sockets and threads, no dependency; the chaos suite can reuse it.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from types import TracebackType
from typing import Self

WRITE_MARKER = b"written_position\x00"
"""A column name only the recorder's insert returns (its RowDescription carries it)."""
READY_FOR_QUERY = b"Z\x00\x00\x00\x05"
"""The server's ReadyForQuery message: type, length 5, then one status byte."""
CHUNK = 65536


class Link:
    """One client connection and its upstream connection, pumped by two threads."""

    def __init__(self, proxy: WireProxy, client: socket.socket, server: socket.socket) -> None:
        self.proxy = proxy
        self.client = client
        self.server = server
        self.swallowed = bytearray()  # the server bytes held back while dropping a reply
        self.dropping = False
        self.closed = False

    def start(self) -> None:
        threading.Thread(target=self._pump_up, daemon=True).start()
        threading.Thread(target=self._pump_down, daemon=True).start()

    def cut(self) -> None:
        """Close both sides at once, as a failed network path would."""
        if self.closed:
            return
        self.closed = True
        for sock in (self.client, self.server):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        self.proxy.forget(self)

    def _pump_up(self) -> None:
        """Client to server: every byte, as it comes (into the void while stalled)."""
        try:
            while data := self.client.recv(CHUNK):
                if self.proxy.swallowed_by_stall(self):
                    continue
                self.server.sendall(data)
        except OSError:
            pass
        self.cut()

    def _pump_down(self) -> None:
        """Server to client: every byte, unless this link was chosen to lose a write's reply."""
        try:
            while data := self.server.recv(CHUNK):
                if self.proxy.swallowed_by_stall(self):
                    continue
                if not self.dropping and WRITE_MARKER in data and self.proxy.take_fault():
                    self.dropping = True
                if not self.dropping:
                    self.client.sendall(data)
                    continue
                self.swallowed += data
                start = self.swallowed.find(WRITE_MARKER)
                if self.swallowed.find(READY_FOR_QUERY, start) >= 0:  # committed; now cut
                    self.cut()
                    self.proxy.fault_done()
                    return
        except OSError:
            pass
        self.cut()


class WireProxy:
    """Listens on a free local port and forwards to PostgreSQL, injecting faults on request."""

    def __init__(self, upstream: tuple[str, int] = ("127.0.0.1", 5432)) -> None:
        self.upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._changed = threading.Condition()
        self._links: set[Link] = set()
        self._armed = False
        self._stalled = False
        self._holed: set[Link] = set()  # links that lost bytes to a stall
        self.dropped_replies = 0
        self.connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, store_url: str) -> str:
        """``store_url`` (a postgresql:// URL of the upstream server) routed through the proxy."""
        host, port = self.upstream
        direct = f"@{host}:{port}/"
        if direct not in store_url:
            raise ValueError(f"{store_url!r} does not name {host}:{port}")
        return store_url.replace(direct, f"@127.0.0.1:{self.port}/", 1)

    # -- faults ---------------------------------------------------------------------------

    def drop_next_write_reply(self) -> None:
        """Swallow the reply to the next event-store write, then cut its connection."""
        with self._changed:
            self._armed = True

    def wait_dropped(self, count: int = 1, timeout: float = 10.0) -> bool:
        """Wait until ``count`` replies were dropped in all; False at the deadline."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while self.dropped_replies < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
        return True

    @property
    def armed(self) -> bool:
        """Whether a drop was asked for and has not happened yet."""
        with self._changed:
            return self._armed

    def cut_all(self) -> int:
        """Cut every open connection; how many there were."""
        with self._changed:
            links = list(self._links)
        for link in links:
            link.cut()
        return len(links)

    def stall(self) -> None:
        """Stop forwarding anything, silently, until :meth:`heal` (a black hole)."""
        with self._changed:
            self._stalled = True

    def heal(self) -> None:
        """Forward again; the connections the stall took bytes from are cut."""
        with self._changed:
            self._stalled = False
            holed, self._holed = list(self._holed), set()
        for link in holed:
            link.cut()

    def swallowed_by_stall(self, link: Link) -> bool:
        """Whether ``link``'s bytes fall into the black hole now (then it has a hole)."""
        with self._changed:
            if self._stalled:
                self._holed.add(link)
            return self._stalled

    def take_fault(self) -> bool:
        """Claim the armed fault for one link (at most one link gets it)."""
        with self._changed:
            armed, self._armed = self._armed, False
            return armed

    def fault_done(self) -> None:
        with self._changed:
            self.dropped_replies += 1
            self._changed.notify_all()

    def forget(self, link: Link) -> None:
        with self._changed:
            self._links.discard(link)

    # -- plumbing -------------------------------------------------------------------------

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            link = Link(self, client, server)
            with self._changed:
                self._links.add(link)
                self.connections += 1
            link.start()

    def close(self) -> None:
        """Stop listening and cut every connection."""
        self._listener.close()
        self.cut_all()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
