"""The ``actae`` command: the demo and read-only inspection of a store.

Inspection commands print JSON, so their output can be piped into ``jq`` or a notebook.
They only read: a URL that names no store is refused, never answered from a new empty store.
Errors a user can cause (a bad URL, a store that is missing or does not answer) print one
line to stderr and exit with status 2; a traceback is left for bugs. The long-running
commands (``worker``, ``project``) log to stderr, as text or, with ``--log-format json``, one
JSON object per line (docs/logging.md).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import importlib
import importlib.metadata
import importlib.util
import logging
import math
import os
import signal
import socket
import sqlite3
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import orjson
import psycopg
from eventsourcing import persistence
from pydantic import BaseModel

from actae.adapters.cli.opening import add_store_options, open_waiting, store_url
from actae.adapters.drill.demo import demo
from actae.adapters.drill.run import drill as run_drill
from actae.adapters.logs import configure
from actae.adapters.persistence.clock import OffsetClock
from actae.adapters.persistence.outages import missing_table, summary
from actae.adapters.persistence.url import parse_store_url
from actae.adapters.runtime.async_store import AsyncStore
from actae.adapters.runtime.async_worker import AsyncWorker
from actae.adapters.runtime.store import Store
from actae.adapters.runtime.store import open as open_store
from actae.adapters.runtime.worker import REGISTRY, CommitHook, Registry, Worker
from actae.domain.errors import ActaeError, ValidationError

CANNOT_OPEN = (
    psycopg.OperationalError,  # connecting: refused, unknown host, bad password, no database
    psycopg.InterfaceError,
    sqlite3.DatabaseError,  # a file that cannot be opened or is not a database
    persistence.OperationalError,  # the same, met by eventsourcing after the store opened
    persistence.InterfaceError,
)
"""Errors that mean the store cannot be opened or reached (at start or later, when a
server restarts or a file is locked), not that Actae has a bug."""

log = logging.getLogger("actae.cli")


def _default(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(by_alias=True)
    raise TypeError(type(value).__name__)


def _print_json(value: Any) -> None:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    elif isinstance(value, list):
        value = [dataclasses.asdict(item) for item in value]
    sys.stdout.write(orjson.dumps(value, default=_default, option=orjson.OPT_INDENT_2).decode())
    sys.stdout.write("\n")


def _version() -> str:
    try:
        return importlib.metadata.version("actae")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (the actae distribution is not installed)"


INT64 = 2**63 - 1
"""Cursors, positions and counts are stored as signed 64-bit integers."""


def _whole(minimum: int, maximum: int = INT64) -> Callable[[str], int]:
    """An argparse type: a whole number in ``[minimum, maximum]``, or a one-line error."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if not minimum <= value <= maximum:
            raise argparse.ArgumentTypeError(f"must be from {minimum} to {maximum}, got {value}")
        return value

    return parse


def _seconds(maximum: float) -> Callable[[str], float]:
    """An argparse type: a finite number of seconds above 0 and at most ``maximum``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
        if not (math.isfinite(value) and 0 < value <= maximum):
            raise argparse.ArgumentTypeError(f"must be above 0 and at most {maximum:g}, got {text}")
        return value

    return parse


class OneLineParser(argparse.ArgumentParser):
    """Usage errors are one line and exit status 2, like every other CLI error."""

    def error(self, message: str) -> NoReturn:
        """Print ``prog: error: message`` and where to look, then exit 2."""
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _add_wait_for_db(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--wait-for-db",
        metavar="SECONDS",
        type=_seconds(86_400.0),
        default=0.0,
        help="if the database is unreachable at start, wait up to SECONDS for it (for "
        "supervisors restarting processes during an outage; default 0: fail at once). Once "
        "running, outages are always waited out",
    )


def _add_log_format(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--log-format",
        choices=("text", "json"),
        default="text",
        help="how log lines on stderr look: text (the message, then time, level, logger and "
        "fields such as worker and run_id), or json (one JSON object per line); default text",
    )


def _parser(*, imports_required: bool = True) -> argparse.ArgumentParser:
    parser = OneLineParser(prog="actae", description="Durable execution for LLM-agent runs.")
    parser.add_argument("--version", action="version", version=f"actae {_version()}")
    commands = parser.add_subparsers(dest="command", required=True)
    demo_cmd = commands.add_parser(
        "demo", help="run a short workflow, kill its worker with SIGKILL, recover, fork"
    )
    add_store_options(demo_cmd, required=False)
    drill_cmd = commands.add_parser(
        "drill",
        help="the failure drill: kill, resume, duplicates, 429s, a 24-hour pause, a migration",
        description="Run a five-agent workflow with real worker processes and a mock payment "
        "provider; SIGKILL the coordinating worker after K of 7 transitions; resume on other "
        "workers that roll out a schema migration; inject duplicate deliveries; then report, "
        "from the store's history and the provider's own ledger, recovery time, manual steps, "
        "duplicates, lost events, re-run model calls, 429s honoured and cost. Exits 1 if any "
        "invariant fails.",
    )
    add_store_options(drill_cmd, required=False)
    drill_cmd.add_argument("--agents", type=_whole(3, 50), default=5)
    drill_cmd.add_argument("--runs", type=_whole(1, 1000), default=1)
    drill_cmd.add_argument("--seed", type=_whole(0))
    drill_cmd.add_argument("--kill-after", type=_whole(1, 6), default=3)
    drill_cmd.add_argument("--json", action="store_true", help="machine-readable report")
    drill_cmd.add_argument(
        "--crash-point",
        choices=("after-model-call", "during-commit", "after-charge-accepted", "while-waiting"),
        help="make the first worker SIGKILL itself at this point instead of --kill-after",
    )
    drill_cmd.add_argument(
        "--db-fault",
        choices=("restart", "crash", "terminate"),
        help="also take the PostgreSQL server of --db (a cluster on this machine) down once or "
        "twice per run: restart it, SIGKILL its postmaster, or terminate every session",
    )
    project_cmd = commands.add_parser(
        "project",
        help="keep the read models (run_status, lineage, effects) up to date",
        description="Catch up the read models in batches, then follow new events live "
        "(LISTEN/NOTIFY on PostgreSQL, polling on SQLite) until SIGTERM or Ctrl-C. Progress is "
        "shown while catching up a large backlog; poison events are recorded in "
        "actae_projection_errors and skipped.",
    )
    add_store_options(project_cmd, required=True)
    project_cmd.add_argument("--once", action="store_true", help="catch up, then exit")
    project_cmd.add_argument(
        "--rebuild",
        action="store_true",
        help="rebuild from zero into fresh tables and swap them in atomically, then exit",
    )
    project_cmd.add_argument("--batch-size", type=_whole(1, 100_000), default=2000)
    _add_wait_for_db(project_cmd)
    _add_log_format(project_cmd)
    worker_cmd = commands.add_parser(
        "worker",
        help="run registered workflows, taking over runs whose worker died",
        description="Import modules that register workflows with @actae.workflow(name), then "
        "loop: keep the read models current, fire due timers and expire due approvals, and "
        "run every runnable run whose agent_id has a registered workflow, under a lease "
        "renewed while it runs. A run whose worker died is taken over once its lease runs "
        "out; its recorded steps replay instead of running again. Stops on SIGTERM/Ctrl-C.",
    )
    add_store_options(worker_cmd, required=True)
    worker_cmd.add_argument(
        "--import",
        dest="imports",
        action="append",
        required=imports_required,
        metavar="MODULE_OR_FILE",
        help="module name or .py file that registers workflows (repeatable)",
    )
    worker_cmd.add_argument("--name", default=None, help="worker name (default: host:pid)")
    worker_cmd.add_argument(
        "--lease",
        type=_seconds(86_400.0),
        default=30.0,
        help="seconds a run stays ours without a heartbeat (default 30)",
    )
    worker_cmd.add_argument("--poll-interval", type=_seconds(3600.0), default=0.2)
    worker_cmd.add_argument(
        "--concurrency",
        type=_whole(1, 10_000),
        default=1,
        metavar="N",
        help="runs served at once, each under its own lease: sync workflows in a pool of N "
        "threads, async ones on one event loop (default 1)",
    )
    worker_cmd.add_argument("--once", action="store_true", help="one pass, then exit")
    _add_wait_for_db(worker_cmd)
    _add_log_format(worker_cmd)
    worker_cmd.add_argument(
        "--clock-file",
        metavar="PATH",
        help="virtual time for tests: the store's clock plus the seconds held in PATH, shared "
        "by every process given the same file (see docs/time.md)",
    )
    for name, target, text in [
        ("head", "channel_id", "receipt of a channel's last event"),
        ("state", "channel_id", "state version in force at a cursor (default: head)"),
        ("events", "channel_id", "events of a channel"),
        ("recover", "channel_id", "state at the head plus the recorded events after it"),
        ("run", "run_id", "a run with its status and head"),
        ("lineage", "run_id", "fork receipts up and down from a run"),
    ]:
        command = commands.add_parser(name, help=text)
        add_store_options(command, required=True)
        command.add_argument(target)
        if name == "state":
            command.add_argument("--cursor", type=_whole(1))
        if name == "events":
            command.add_argument("--after", type=_whole(0), default=0)
            command.add_argument("--limit", type=_whole(1))
    return parser


def _inspect(args: argparse.Namespace) -> Any:
    queries: dict[str, Callable[[Store], Any]] = {
        "head": lambda s: s.head(args.channel_id),
        "state": lambda s: s.state_at(args.channel_id, cursor=args.cursor),
        "events": lambda s: s.events(args.channel_id, after=args.after, limit=args.limit),
        "recover": lambda s: s.recover(args.channel_id),
        "run": lambda s: s.run(args.run_id),
        "lineage": lambda s: s.lineage(args.run_id),
    }
    with open_store(args.db, create=False) as store:
        return queries[args.command](store)


def _project(args: argparse.Namespace) -> int:
    configure(json=args.log_format == "json")

    # A projector follows a store; it never creates one (a mistyped schema fails at once).
    def prepare(store: Store) -> object:
        return store.projector(batch_size=args.batch_size)

    with open_waiting(args, "project", prepare, create=False) as store:
        projector = store.projector()
        if args.rebuild:
            count = projector.rebuild()
            log.info("rebuilt the read models from %s events", f"{count:,}")
            return 0
        # Stop cleanly on SIGTERM from here on, also during the first catch-up (which
        # finishes its batch and returns), not only once following live.
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: projector.request_stop())
        count = projector.catch_up()
        log.info("caught up: %s events, position %d", f"{count:,}", projector.position())
        if not args.once:
            projector.run()
    return 0


def _import(target: str) -> None:
    """Import a module by name, or a ``.py`` file the way ``python file.py`` would run it.

    The file's folder goes first on ``sys.path``, as Python does for a script, so the file
    can import the modules beside it; it stays there for imports made later, inside steps.
    """
    if target.endswith(".py"):
        path = Path(target).resolve()
        if not path.is_file():
            raise ValidationError("--import", f"no such file: {target}")
        if str(path.parent) not in sys.path:
            sys.path.insert(0, str(path.parent))
        spec = importlib.util.spec_from_file_location(f"actae_workflows_{abs(hash(target))}", path)
        if spec is None or spec.loader is None:
            raise ValidationError("--import", f"cannot load {target}")
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    else:
        importlib.import_module(target)


def _worker(
    args: argparse.Namespace, registry: Registry | None, on_commit: CommitHook | None
) -> int:
    name = args.name or f"{socket.gethostname()}:{os.getpid()}"
    configure(json=args.log_format == "json", worker=name)
    for target in args.imports or ():
        _import(target)
    clock = OffsetClock(args.clock_file) if args.clock_file else None
    with open_waiting(args, "worker", lambda store: store.projector(), clock=clock) as store:
        if args.concurrency > 1:
            if on_commit is not None:
                store.on_commit(on_commit)
            return asyncio.run(
                _work_concurrently(store, args, name, REGISTRY if registry is None else registry)
            )
        worker = Worker(
            store,
            name=name,
            registry=REGISTRY if registry is None else registry,
            lease=args.lease,
            poll_interval=args.poll_interval,
            on_commit=on_commit,
        )
        if args.once:
            worker.run_once()
            worker.withdraw()
            return 0

        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: worker.request_stop())
        log.info("working on %s", store.url)
        worker.run()
    return 0


async def _work_concurrently(
    store: Store, args: argparse.Namespace, name: str, registry: Registry
) -> int:
    """``actae worker --concurrency N``: an ``AsyncWorker`` on the store, until stopped."""
    async with AsyncStore(store) as async_store:
        worker = AsyncWorker(
            async_store,
            name=name,
            registry=registry,
            concurrency=args.concurrency,
            lease=args.lease,
            poll_interval=args.poll_interval,
        )
        if args.once:
            await worker.run_once()
            await worker.withdraw()
            return 0
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, worker.request_stop)
        log.info("working on %s, %d runs at once", store.url, args.concurrency)
        await worker.run()
    return 0


def _cannot_open(db: str | None, error: Exception) -> str:
    """One line for a store that could not be opened: what failed, and what to check."""
    detail = (str(error).strip().splitlines() or [type(error).__name__])[0]
    if db is None:
        return f"cannot open or reach the store: {detail}"
    parsed = parse_store_url(db)
    password = parsed.postgres_conninfo.get("password")
    if password:
        detail = detail.replace(password, "***")
    hint = (
        "check the path (its folder must exist and be writable)"
        if parsed.backend == "sqlite"
        else "check the URL, and that the server is running and reachable from here"
    )
    return f"cannot open or reach the store at {parsed.display}: {detail}; {hint}"


def main(
    argv: Sequence[str] | None = None,
    *,
    registry: Registry | None = None,
    on_commit: CommitHook | None = None,
) -> int:
    """Run the CLI; returns the process exit status.

    ``registry`` and ``on_commit`` are for programs that run ``actae worker`` with workflows
    and hooks of their own (the drill's worker processes): the workflows to run (``--import``
    is then optional) and the worker's ``on_commit`` hook (see :class:`Worker`).
    """
    args = _parser(imports_required=registry is None).parse_args(argv)
    try:
        args.db = store_url(args, os.environ)
        if args.db is not None:
            parse_store_url(args.db)  # a bad URL fails here, before any work starts
        return _dispatch(args, registry, on_commit)
    except ActaeError as error:
        print(f"actae: error: {error}", file=sys.stderr)
        return 2
    except CANNOT_OPEN as error:
        print(f"actae: error: {_cannot_open(args.db, error)}", file=sys.stderr)
        return 2
    except Exception as error:
        if not missing_table(error):
            raise
        print(f"actae: error: no Actae store here any more: {summary(error)}", file=sys.stderr)
        return 2


def _dispatch(
    args: argparse.Namespace, registry: Registry | None, on_commit: CommitHook | None
) -> int:
    """Run the chosen command."""
    if args.command == "demo":
        return demo(args.db)
    if args.command == "project":
        return _project(args)
    if args.command == "drill":
        return run_drill(
            args.db,
            agents=args.agents,
            runs=args.runs,
            seed=args.seed,
            kill_after=args.kill_after,
            as_json=args.json,
            crash_point=args.crash_point,
            db_fault=args.db_fault,
        )
    if args.command == "worker":
        return _worker(args, registry, on_commit)
    _print_json(_inspect(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
