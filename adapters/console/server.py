"""``actae console``: serve the console with uvicorn until SIGINT or SIGTERM.

A signal ends the event streams at once (uvicorn would wait for every open tab). The console
opens before uvicorn's startup, so a failure there is an ``ActaeError``, not a log traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import FrameType

import uvicorn

from actae.adapters.console.app import create_app
from actae.adapters.console.auth import NO_USERS, load_users
from actae.adapters.console.guards import loopback, own_origins, parse_origin
from actae.adapters.console.limits import MAX_BODY
from actae.adapters.console.state import Console
from actae.adapters.logs import ROOT, configure
from actae.adapters.persistence.outages import summary
from actae.adapters.runtime.store import open as open_store
from actae.domain.errors import ActaeError, ValidationError
from actae.domain.validation import require_int

log = logging.getLogger("actae.console")

GRACE = 5.0  # seconds a stop waits for requests in flight before cancelling them
TICK = 1.0  # seconds between two rounds of uvicorn's housekeeping (headers, stop, limits)


class _Server(uvicorn.Server):
    """uvicorn, ending the console's streams on a signal and returning (not re-raising) after."""

    def __init__(self, config: uvicorn.Config, console: Console, url: str) -> None:
        super().__init__(config)
        self._console = console
        self._url = url
        self.failure: Exception | None = None  # why the console could not open

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """Handle SIGINT and SIGTERM while serving; restore the handlers after."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        handled = (signal.SIGINT, signal.SIGTERM)
        before = {signum: signal.signal(signum, self.handle_exit) for signum in handled}
        try:
            yield
        finally:
            for signum, handler in before.items():
                signal.signal(signum, handler)

    async def main_loop(self) -> None:
        """Run uvicorn's housekeeping once per :data:`TICK`, not ten times a second (idle CPU)."""
        while not await self.on_tick(0):
            await asyncio.sleep(TICK)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """Stop: end the streams now, then let uvicorn finish what is in flight."""
        if not self.should_exit:
            log.info("stopping (%s)", signal.Signals(sig).name)
        self._console.end_streams()
        super().handle_exit(sig, frame)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        """Open the console, start serving, then say where (or keep why it cannot open)."""
        try:
            await self._console.open()  # the app's own startup then finds it open
        except Exception as error:
            self.failure = error
            self.should_exit = True
            return
        await super().startup(sockets)
        if self.started:
            log.info("serving %s", self._url)


def _listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host``:``port``, or a clear error saying why not."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise ValidationError(
            "port", f"cannot listen on {host}:{port}: {error.strerror or error}"
        ) from None
    return sock


def serve(
    url: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8080,
    auth_file: Path,
    max_body: int = MAX_BODY,
    origins: Sequence[str] = (),
) -> None:
    """Serve the console for the store at ``url`` (which must exist) until SIGINT or SIGTERM.

    ``port=0`` takes a free port (the log line ``serving http://...`` says which).
    """
    max_body = require_int("max_body", max_body, minimum=1)
    if auth_file is None:
        raise ValidationError("auth_file", NO_USERS)
    users = load_users(Path(auth_file))
    extra = [parse_origin(origin) for origin in origins]  # a bad --origin: before binding
    if not logging.getLogger(ROOT).handlers and not logging.getLogger().handlers:
        configure()  # run without the CLI: the lines still go somewhere
    sock = _listen(host, port)
    port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    address = f"http://{shown}:{port}/"
    if not loopback(host):
        log.warning("listening on %s over plain HTTP: put it behind TLS (docs/console.md)", host)
    try:
        store = open_store(url, create=False)
    except BaseException:
        sock.close()
        raise
    allowed = own_origins(host, port, extra)
    app = create_app(store, users, max_body=max_body, origins=allowed)
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=int(GRACE),
        lifespan="on",
    )
    server = _Server(config, app.state.console, address)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
        store.close()  # closed by the app when it started; here if it could not
    failure = server.failure
    if isinstance(failure, ActaeError):
        raise failure
    if failure is not None:
        raise ActaeError(f"the console could not start: {summary(failure)}") from failure
    if not server.started:
        raise ActaeError("the console did not start; the lines above say why")
    log.info("stopped")
