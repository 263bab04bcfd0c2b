"""The commands that run something: ``demo``, ``drill``, ``project`` and ``worker``."""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from actae.adapters.cli.opening import (
    Seconds,
    invocation,
    log_format,
    open_waiting,
    store_options,
    wait_for_db,
    whole,
)
from actae.adapters.drill.db_faults import FAULTS as DB_FAULTS
from actae.adapters.drill.demo import demo as run_demo
from actae.adapters.drill.run import STEPS
from actae.adapters.drill.run import drill as run_drill
from actae.adapters.drill.workflows import CRASH_POINTS
from actae.adapters.logs import configure
from actae.adapters.persistence.clock import OffsetClock
from actae.adapters.persistence.libpq import name_connections
from actae.adapters.runtime.async_store import AsyncStore
from actae.adapters.runtime.async_worker import AsyncWorker
from actae.adapters.runtime.store import Store
from actae.adapters.runtime.worker import REGISTRY, RETENTION_EVERY, Worker
from actae.domain.errors import ValidationError

log = logging.getLogger("actae.cli")
F = TypeVar("F", bound=Callable[..., Any])


@click.command()
@store_options(required=False)
def demo() -> int:
    """Run a short workflow, kill its worker with SIGKILL, recover, fork."""
    return run_demo(invocation().url(required=False))


@click.command(
    help="The failure drill: run a five-agent workflow with real worker processes and a mock "
    "payment provider; SIGKILL the coordinating worker after K of 7 transitions; resume on "
    "other workers that roll out a schema migration; inject duplicate deliveries; then "
    "report, from the store's history and the provider's own ledger, recovery time, manual "
    "steps, duplicates, lost events, re-run model calls, 429s honoured and cost. Exits 1 if "
    "any invariant fails.",
    short_help="The failure drill: kill, resume, duplicates, 429s, a 24-hour pause, a migration",
)
@store_options(required=False)
@click.option("--agents", type=whole(3, 50), default=5, show_default=True)
@click.option("--runs", type=whole(1, 1000), default=1, show_default=True)
@click.option("--seed", type=whole(0))
@click.option("--kill-after", type=whole(1, STEPS - 1), default=3, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="machine-readable report")
@click.option(
    "--crash-point",
    type=click.Choice(CRASH_POINTS),
    help="make the first worker SIGKILL itself at this point instead of --kill-after",
)
@click.option(
    "--db-fault",
    type=click.Choice(DB_FAULTS),
    help="also take the PostgreSQL server of --db (a cluster on this machine) down once or "
    "twice per run: restart it, SIGKILL its postmaster, or terminate every session",
)
def drill(**options: Any) -> int:
    """``actae drill``: its options are :func:`~actae.adapters.drill.run.drill`'s."""
    return run_drill(invocation().url(required=False), **options)


@click.command(
    help="Keep the read models (run_status, lineage, effects, audit, usage) up to date: catch "
    "up in batches, then follow new events live (looking again soon while events flow, every "
    "second when idle) until SIGTERM or Ctrl-C. Progress is shown while catching up a large "
    "backlog; poison events are recorded in actae_projection_errors and skipped.",
    short_help="Keep the read models up to date.",
)
@store_options(required=True)
@click.option("--once", is_flag=True, help="catch up, then exit")
@click.option(
    "--rebuild",
    is_flag=True,
    help="rebuild from zero into fresh tables and swap them in atomically, then exit",
)
@click.option("--batch-size", type=whole(1, 100_000), default=2000, show_default=True)
@wait_for_db
@log_format
def project(
    once: bool, rebuild: bool, batch_size: int, wait_for_db: float | None, log_format: str
) -> int:
    """``actae project``."""
    url = invocation().required_url()
    configure(json=log_format == "json")
    name_connections("actae-projector")

    # A projector follows a store; it never creates one (a mistyped schema fails at once).
    def prepare(store: Store) -> object:
        return store.projector(batch_size=batch_size)

    within = wait_for_db or 0.0
    with open_waiting(url, "project", prepare, within=within, create=False) as store:
        projector = store.projector()
        if rebuild:
            count = projector.rebuild()
            log.info("rebuilt the read models from %s events", f"{count:,}")
            return 0
        # Stop cleanly on SIGTERM from here on, also during the first catch-up (which
        # finishes its batch and returns), not only once following live.
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: projector.request_stop())
        count = projector.catch_up()
        log.info("caught up: %s events, position %d", f"{count:,}", projector.position())
        if not once:
            projector.run()
    return 0


def import_workflows(target: str) -> None:
    """Import a module by name, or a ``.py`` file as ``python file.py`` would (its folder first)."""
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


SERVING = (
    ("--lease", Seconds(86_400.0), 30.0, None, "seconds a run stays ours without a heartbeat"),
    ("--poll-interval", Seconds(3600.0), 0.2, None, None),
    (
        "--concurrency",
        whole(1, 10_000),
        1,
        "N",
        "runs served at once, each under its own lease: sync workflows in a pool of N "
        "threads, async ones on one event loop",
    ),
    ("--once", None, False, None, "one pass, then exit"),
    (
        "--retention-every",
        Seconds(86_400.0 * 365),
        RETENTION_EVERY,
        "SECONDS",
        "apply the store's retention policies this often (see actae retention)",
    ),
)
"""How a worker serves: ``--concurrency`` and ``--once`` pick the loop, the rest are ``Worker``'s
keyword arguments of the same names."""


def _serving(command: F) -> F:
    for option, kind, default, metavar, help in reversed(SERVING):
        flag = kind is None
        command = click.option(
            option,
            type=kind,
            default=default,
            show_default=not flag,
            is_flag=flag,
            metavar=metavar,
            help=help,
        )(command)
    return command


@click.command(
    help="Import modules that register workflows with @actae.workflow(name), then loop: keep "
    "the read models current, fire due timers and expire due approvals, and run every "
    "runnable run whose agent_id has a registered workflow, under a lease renewed while it "
    "runs. A run whose worker died is taken over once its lease runs out; its recorded steps "
    "replay instead of running again. Stops on SIGTERM/Ctrl-C.",
    short_help="Run registered workflows, taking over runs whose worker died.",
)
@store_options(required=True)
@click.option(
    "--import",
    "imports",
    multiple=True,
    metavar="MODULE_OR_FILE",
    help="module name or .py file that registers workflows (repeatable; required unless the "
    "program gives its own workflows)",
)
@click.option("--name", default=None, help="worker name (default: host:pid)")
@_serving
@wait_for_db
@log_format
@click.option(
    "--clock-file",
    metavar="PATH",
    help="virtual time for tests: the store's clock plus the seconds held in PATH, shared "
    "by every process given the same file (see docs/time.md)",
)
def worker(
    imports: tuple[str, ...],
    name: str | None,
    concurrency: int,
    once: bool,
    wait_for_db: float | None,
    log_format: str,
    clock_file: str | None,
    **serving: Any,
) -> int:
    """``actae worker``."""
    given = invocation()
    if not imports and given.registry is None:
        raise click.UsageError("missing option '--import'")
    url = given.required_url()
    name = name or f"{socket.gethostname()}:{os.getpid()}"
    configure(json=log_format == "json", worker=name)
    name_connections(f"actae-worker:{name}")
    for target in imports:
        import_workflows(target)
    serving.update(name=name, registry=REGISTRY if given.registry is None else given.registry)
    clock = OffsetClock(clock_file) if clock_file else None
    within = wait_for_db or 0.0
    with open_waiting(url, "worker", lambda s: s.projector(), within=within, clock=clock) as store:
        if concurrency > 1:
            if given.on_commit is not None:
                store.on_commit(given.on_commit)
            return asyncio.run(_work_concurrently(store, serving, concurrency, once))
        worker = Worker(store, on_commit=given.on_commit, **serving)
        if once:
            worker.run_once()
            worker.withdraw()
            return 0
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: worker.request_stop())
        log.info("working on %s", store.url)
        worker.run()
    return 0


async def _work_concurrently(
    store: Store, serving: dict[str, Any], concurrency: int, once: bool
) -> int:
    """``actae worker --concurrency N``: an ``AsyncWorker`` on the store, until stopped."""
    async with AsyncStore(store) as async_store:
        worker = AsyncWorker(async_store, concurrency=concurrency, **serving)
        if once:
            await worker.run_once()
            await worker.withdraw()
            return 0
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, worker.request_stop)
        log.info("working on %s, %d runs at once", store.url, concurrency)
        await worker.run()
    return 0
