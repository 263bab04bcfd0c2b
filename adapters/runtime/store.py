"""The public store, ``actae.open(url)``, and the run context ``store.resume`` gives.

The composition root (docs/architecture.md). A command's arguments are listed once, by its
domain function, which :func:`command` binds as the ``Store`` method of the same name; the
methods written out here do adapter work around their command (a span, a data key, a
purge's deletes), and queries validate their arguments as every entry point does.

A :class:`RunContext` gives each call a deterministic operation id (run + kind + name +
occurrence), so code run again from the top after a crash gets every recorded result back
instead of running it again (docs/workflows.md). The two classes share a module because
each names the other in its public face (``Store.resume``, ``RunContext.store``).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, BinaryIO, Concatenate, ParamSpec, Self, TextIO, TypeVar, cast
from uuid import UUID

import pydantic

from actae.adapters.custody.holding import Holding, keyring_of
from actae.adapters.custody.sealing import SealingMapper
from actae.adapters.persistence.awaiting import off_the_loop
from actae.adapters.persistence.clock import close_clock, host_skew
from actae.adapters.persistence.codec import OrjsonCodec
from actae.adapters.persistence.outages import Outage, ride_out
from actae.adapters.persistence.url import parse_store_url
from actae.adapters.readside.projector import Projector
from actae.adapters.readside.subscription import ConditionWaiter, Subscription, Waiter
from actae.adapters.redaction.redactors import redactor_of
from actae.adapters.runtime.backends import Backend, backend_for
from actae.adapters.runtime.boundary import STOPPED, ensure_may_go_on
from actae.adapters.runtime.channel_head import ChannelHead
from actae.adapters.runtime.inheritance import Inheritance
from actae.adapters.runtime.retention import Purger
from actae.adapters.runtime.run_ledger import Reconcile, RunLedger
from actae.adapters.runtime.service import ActaeService
from actae.adapters.telemetry import tracing
from actae.adapters.telemetry.names import FORK_SPAN, START_SPAN
from actae.adapters.telemetry.runs import RunTrace, fork_attributes
from actae.adapters.telemetry.runs import started as run_started
from actae.adapters.telemetry.tracing import Start
from actae.domain import channel, forking, keeping, ledger, lifecycle, starting
from actae.domain.artifacts import ArtifactRef, reference_in
from actae.domain.effects import STEP_RESULT, Claim, RetryPolicy
from actae.domain.errors import (
    IncompatibleResumeError,
    NotFoundError,
    RunStoppedError,
    RunSuspended,
    StoreNotFoundError,
    ValidationError,
)
from actae.domain.lifecycle import Migration
from actae.domain.pipeline import Core, Shell
from actae.domain.ports import Clock
from actae.domain.reader import channel_event_of, operation_record_of
from actae.domain.redaction import Redactor
from actae.domain.starting import TraceContext
from actae.domain.validation import (
    DEFAULT_MAX_DOCUMENT_BYTES,
    require_int,
    require_number,
    require_pins,
    require_text,
    require_uuid,
)
from actae.domain.values import (
    ChannelEvent,
    ForkReceipt,
    Lineage,
    OperationRecord,
    Pins,
    Receipt,
    Recovery,
    RetentionReport,
    RunInfo,
    StateVersion,
)
from actae.domain.waits import Decision

P = ParamSpec("P")
T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

GLOBAL_PAGE = 10_000
"""Events of all channels that ``Store.events(None)`` returns when given no ``limit``."""
PATIENCE = 60.0
"""Seconds a context outside a worker (no run lease) waits out an outage to record a result."""
log = logging.getLogger("actae.context")

if TYPE_CHECKING:
    from actae.adapters.runtime.run_lease import RunLease


def open(
    url: str,
    *,
    clock: Clock | None = None,
    max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES,
    create: bool = True,
    keyring: str | None = None,
    redact: Redactor | bool | None = None,
) -> Store:
    """Open (and create or migrate, if needed) the store at ``url``.

    ``keyring`` (a path, or ``?keyring=`` in the URL) encrypts what agents produce under a
    data key per run; ``redact`` (``True`` for the built-in patterns, or a redactor of your
    own) removes secrets from every record and result before it is written (docs/data.md).
    ``clock`` replaces the store's clock, the database server's on PostgreSQL and this
    host's elsewhere: a :class:`ManualClock`, an :class:`OffsetClock` (docs/time.md). With
    ``create=False`` only an existing store opens (else :class:`StoreNotFoundError`, nothing
    created); ``memory://`` is always new.
    """
    parsed = parse_store_url(url)
    max_document_bytes = require_int("max_document_bytes", max_document_bytes, minimum=1)
    master_keys = keyring_of(parsed, keyring)
    redactor = redactor_of(redact)
    backend = backend_for(parsed)
    store_time = backend.clock(clock)
    holdings: list[Holding] = []

    def mappers(_: Any) -> tuple[SealingMapper, SealingMapper]:
        holding = Holding(parsed, backend.tables(), master_keys, backend.forget_watch())
        holdings.append(holding)
        return holding.mapper, holding.metadata_mapper

    def build(create_tables: bool) -> ActaeService:
        return ActaeService(
            backend.event_store(mappers, create_tables=create_tables),
            codec=OrjsonCodec(),
            clock=store_time,
            max_document_bytes=max_document_bytes,
            redact=redactor,
        )

    service: ActaeService | None = None
    try:
        service = backend.open(build, create=create)
    finally:
        if service is None:
            close_clock(store_time)
            backend.close()
    if service is None:
        raise StoreNotFoundError(parsed.display)
    backend.attach_clock(store_time)
    try:
        return Store(service, backend, holdings[-1])
    except BaseException:  # the custody tables could not be made (a bad ``artifacts``, say)
        service.close()
        close_clock(store_time)
        backend.close()
        raise


def command(decide: Callable[Concatenate[Shell, P], T]) -> Callable[Concatenate[Store, P], T]:
    """The ``Store`` method that runs the domain command ``decide`` on the store's shell.

    Its name, docstring and signature are ``decide``'s, with ``self`` for the shell, so the
    arguments are listed once: in the domain function, which validates them.
    """

    def method(self: Store, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._service.call(decide, *args, **kwargs)

    return _named_as(method, decide)


def appended(
    decide: Callable[Concatenate[Core, P], channel.Append],
) -> Callable[Concatenate[Store, P], Receipt]:
    """The ``Store`` method that writes the ``Append`` that ``decide`` makes; its receipt.

    ``record`` and ``transition``: ``decide`` checks the arguments (``domain/channel.py``),
    ``ActaeService.append`` writes (as for :func:`command`, the signature is ``decide``'s).
    """

    def method(self: Store, /, *args: P.args, **kwargs: P.kwargs) -> Receipt:
        service = self._service
        return service.append(decide(service.core, *args, **kwargs))

    return _named_as(method, decide, returns="Receipt")


def _named_as(method: F, decide: Callable[..., Any], returns: str | None = None) -> F:
    """``method`` with ``decide``'s name, docstring and signature, ``self`` for its first."""
    functools.wraps(decide)(method)
    method.__module__ = __name__
    method.__qualname__ = f"Store.{decide.__name__}"
    signature = inspect.signature(decide)
    me = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    parameters = [me, *list(signature.parameters.values())[1:]]
    signature = signature.replace(parameters=parameters)
    if returns is not None:
        signature = signature.replace(return_annotation=returns)
    method.__signature__ = signature  # type: ignore[attr-defined]
    return method


def starting_command(
    decide: Callable[Concatenate[Shell, TraceContext, P], T],
    *,
    span: Callable[..., str],
    describe: Callable[[Start, T], None],
) -> Callable[Concatenate[Store, P], T]:
    """The ``Store`` method for ``decide``, a command that starts a run (a start, a fork).

    As for :func:`command`, the signature is ``decide``'s, without its ``trace_context``:
    the run keeps the trace it is started in, the current span, else a short span named
    ``span(*arguments)`` that ``describe`` tells the new run. A repeat of a start
    that ran already opens none (it would be a stray trace).
    """

    def method(self: Store, /, *args: P.args, **kwargs: P.kwargs) -> T:
        operation_id = cast("str | None", kwargs.get("operation_id"))  # checked by the command
        repeated = lambda: self._ran(operation_id)  # noqa: E731 - asked only without a span
        with tracing.starting(span(*args, **kwargs), repeated, sealed=self.encrypting) as start:
            result = self._service.call(decide, start.trace_context, *args, **kwargs)
            describe(start, result)
        return result

    named = _named_as(method, decide)
    signature = inspect.signature(named)
    parameters = [p for p in signature.parameters.values() if p.name != "trace_context"]
    named.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    return named


def _start_span(
    workflow_id: object = None, *_: object, agent_id: object = None, **__: object
) -> str:
    # The agent names the span, never the workflow id: span names are what trace backends
    # index and group by, and a workflow id is the application's (a customer's, an order's).
    return tracing.span_name(START_SPAN, agent_id)


def _forked(start: Start, receipt: ForkReceipt) -> None:
    start.describe(fork_attributes(receipt))


class Store:
    """A durable-execution store for agent runs. Use as a context manager, or ``close()``."""

    def __init__(self, service: ActaeService, backend: Backend, holding: Holding) -> None:
        self._service = service
        self._holding = holding
        self._backend = backend
        holding.prepare()
        self._reader = service.reader
        self._closed = False
        self._projector: Projector | None = None
        self._purger = Purger(service, holding, backend)

    def __repr__(self) -> str:
        return f"<actae.Store {self.url}>"

    @property
    def redactor(self) -> Redactor | None:
        """The redactor given as ``actae.open(redact=)``, run on every record and result.

        LangGraph's saver runs it on what it packs into serde blobs (docs/langgraph.md).
        """
        return self._service.core.redact

    @property
    def encrypting(self) -> bool:
        """Whether this store encrypts what agents produce (it was opened with a keyring).

        Its workers' log lines and its spans then name an error by its type and where to read
        it, never by its message (docs/logging.md, docs/telemetry.md).
        """
        return self._holding.keys.encrypting

    @property
    def url(self) -> str:
        """The store URL, password masked."""
        return self._backend.url.display

    # -- commands -------------------------------------------------------------------------

    start_run = starting_command(starting.start_run, span=_start_span, describe=run_started)

    def _ran(self, operation_id: str | None) -> bool:
        """Whether a command ran under ``operation_id`` already (a start or fork to replay).

        Asked only to trace: a repeat opens no span of its own. Whatever makes the look fail
        (an id the command refuses, an outage) is the command's to say, so it says no.
        """
        if operation_id is None:
            return False
        try:
            return self.operation(operation_id) is not None
        except Exception:  # the command itself reports it
            return False

    record = appended(channel.record)
    transition = appended(channel.transition)

    fork = starting_command(forking.fork, span=lambda *_, **__: FORK_SPAN, describe=_forked)

    # -- waits, operator actions and endings (domain/lifecycle.py) ------------------------

    suspend = command(lifecycle.suspend)
    approve = command(lifecycle.approve)
    deny = command(lifecycle.deny)
    signal = command(lifecycle.signal)
    wake_due = command(lifecycle.wake_due)
    pause = command(lifecycle.pause)
    unpause = command(lifecycle.unpause)
    retry_run = command(lifecycle.retry_run)
    cancel = command(lifecycle.cancel)
    complete_run = command(lifecycle.complete_run)
    fail_run = command(lifecycle.fail_run)

    # -- the tool-execution ledger (domain/ledger.py) -------------------------------------

    claim = command(ledger.claim)
    heartbeat = command(ledger.heartbeat)
    complete_effect = command(ledger.complete_effect)
    doubt_effect = command(ledger.doubt_effect)
    fail_effect = command(ledger.fail_effect)
    reconcile = command(ledger.reconcile)
    abandon = command(ledger.abandon)
    override = command(ledger.override)
    effect = command(ledger.effect)
    find_effect = command(ledger.find_effect)

    # -- resuming a run -------------------------------------------------------------------

    def resume(
        self,
        run_id: UUID | str,
        *,
        worker: str,
        pins: Mapping[str, Any] | None = None,
        migrations: Mapping[int, Migration] | None = None,
        redact: Redactor | None = None,
    ) -> RunContext:
        """A durable-step context for ``run_id`` driven by ``worker``.

        ``redact`` (the workflow's) runs on what its calls return before the store's does.
        ``pins`` are the worker's: a run pinned to another model, prompt or tools is refused
        (``IncompatibleResumeError``); an older state schema is upgraded by ``migrations[n]``
        (schema n -> n + 1), or refused without it (docs/workflows.md, "Versioned resumes").
        """
        worker = require_text("worker", worker)
        run = self.run(run_id)
        if pins:
            run = self._reconcile_pins(run, require_pins("pins", pins), migrations or {}, worker)
        return RunContext(self, self._service, run, worker, redact=redact)

    def _reconcile_pins(
        self, run: RunInfo, wanted: Pins, migrations: Mapping[int, Migration], worker: str
    ) -> RunInfo:
        differences: dict[str, tuple[Any, Any]] = {
            name: (run.pins[name], wanted[name])
            for name in ("model", "prompt", "tools")
            if wanted[name] is not None and run.pins[name] != wanted[name]
        }
        current, target = run.pins.schema_ or 1, wanted.schema_
        steps = [] if target is None else list(range(current, target))
        if target is not None and (current > target or any(s not in migrations for s in steps)):
            differences["schema"] = (current, target)
        if differences:
            raise IncompatibleResumeError(run.run_id, differences)
        if target is None or not steps:
            return run
        return self._service.call(
            lifecycle.upgrade, run.run_id, target=target, migrations=migrations, actor=worker
        )

    # -- custody: forgetting, artifacts, keys ---------------------------------------------

    def forget(self, run_id: UUID | str, *, actor: str, reason: str) -> RunInfo:
        """Destroy the run's contents for good: crypto-shredding, audited with who and why.

        Its data key goes; its structure stays readable (docs/data.md, "Forgetting a run").
        A live run is cancelled; forks and children keep their own keys; asking again is
        harmless. A run written without encryption has no key: ``ValidationError``.
        """
        run = self._reader.run(require_uuid("run_id", run_id))  # NotFoundError first
        keys = self._holding.keys
        if run.run_id not in keys.present([run.run_id]):  # a key row, live or forgotten
            raise ValidationError(
                "run_id",
                f"run {run.run_id} was written without encryption: it has no key to destroy "
                "(open the store with a keyring to encrypt new runs; purge old ones by "
                "retention)",
            )
        info = self._service.call(keeping.forget, run_id, actor=actor, reason=reason)
        keys.forget(info.run_id)
        return info

    def put_artifact(
        self,
        run_id: UUID | str,
        data_or_file: bytes | BinaryIO | os.PathLike[str],
        *,
        media_type: str = "application/octet-stream",
    ) -> ArtifactRef:
        """Store bytes for the run outside its event log; an authenticated reference.

        ``data_or_file`` is bytes, a binary file object or a path, streamed in 1 MiB chunks;
        identical bytes are stored once (docs/data.md). Keep the reference in a step result
        (``ref.model_dump(mode="json")``) and open it with :meth:`open_artifact`.
        """
        run = self._reader.run(require_uuid("run_id", run_id))  # NotFoundError first
        data_key = self._holding.keys.for_write(run.run_id)
        return off_the_loop(
            self._holding.artifacts.put,
            run.run_id,
            data_or_file,
            media_type=media_type,
            data_key=data_key,
        )

    def open_artifact(self, ref: ArtifactRef | Mapping[str, Any]) -> BinaryIO:
        """A readable binary stream of the artifact ``ref`` names (from :meth:`put_artifact`).

        The reference's MAC is checked first, each chunk as it is read, and the size and
        SHA-256 before the last bytes are handed out: a tampered reference or blob raises
        ``CorruptionError``. ``ForgottenError`` once its run was forgotten.
        """
        checked = _reference(ref)
        data_key = self._holding.data_key_for_reading(checked)
        return cast(BinaryIO, self._holding.artifacts.open(checked, data_key=data_key))

    def rotate_keys(self, *, progress: Callable[[int], None] | None = None) -> int:
        """Re-wrap every run's data key under the keyring's current master key; how many.

        Payloads are not touched, so it may run while workers write, and again after an
        interruption (docs/data.md). ``progress`` is told the count after each batch.
        """
        return self._holding.keys.rewrap_all(progress=progress)

    # -- retention (domain/keeping.py; the purges: adapters/runtime/retention.py) ---------

    set_retention = command(keeping.set_retention)
    retention = command(keeping.retention)
    hold = command(keeping.hold)
    release = command(keeping.release)

    def apply_retention(
        self,
        *,
        actor: str,
        dry_run: bool = False,
        limit: int = 10_000,
        progress: Callable[[int], None] | None = None,
    ) -> RetentionReport:
        """Purge the finished runs whose end plus their policy's time has passed.

        A purge keeps the run's tombstone and lineage, and deletes its events, data key and
        unshared artifacts; held runs, and runs whose forks or children are held, live or
        within their window, stay (docs/data.md, "Retention"). At most ``limit`` runs;
        ``dry_run`` changes nothing; ``progress`` is told the count after each batch. A
        purge or forget a crash cut short is finished first.
        """
        started = time.monotonic()
        actor = require_text("actor", actor)
        limit = require_int("limit", limit, minimum=1)
        projector = self.projector()
        projector.catch_up()
        return self._purger.apply(
            projector,
            self.now(),
            actor=actor,
            dry_run=dry_run,
            limit=limit,
            progress=progress,
            started=started,
        )

    # -- queries --------------------------------------------------------------------------

    def head(self, channel_id: UUID | str) -> Receipt:
        """Receipt of the channel's last event: its cursor and the state version in force."""
        return self._reader.head(require_uuid("channel_id", channel_id))

    def state_at(self, channel_id: UUID | str, cursor: int | None = None) -> StateVersion:
        """The state version in force at ``cursor`` (default: the head), checksum verified."""
        cid = require_uuid("channel_id", channel_id)
        if cursor is not None:
            cursor = require_int("cursor", cursor, minimum=1)
        return self._reader.state_at(cid, cursor)

    def events(
        self, channel_id: UUID | str | None, after: int = 0, limit: int | None = None
    ) -> list[ChannelEvent]:
        """Channel events after ``after``, oldest first, at most ``limit``.

        With a ``channel_id``, ``after`` is a cursor of that channel. With ``None``, events
        of all channels come in the store's global order and ``after`` is a global
        position (``ChannelEvent.position``), as for :meth:`subscribe`; without a
        ``limit`` at most ``GLOBAL_PAGE`` come back, so page through them by passing the
        last one's position.
        """
        after = require_int("after", after, minimum=0)
        if limit is not None:
            limit = require_int("limit", limit, minimum=1)
        if channel_id is None:
            return self._reader.global_events(after=after, limit=limit or GLOBAL_PAGE)
        return self._reader.events(require_uuid("channel_id", channel_id), after=after, limit=limit)

    def recover(self, channel_id: UUID | str) -> Recovery:
        """The state at the head and the recorded events after it (a cursor walk)."""
        return self._reader.recover(require_uuid("channel_id", channel_id))

    def run(self, run_id: UUID | str) -> RunInfo:
        """A run with its status and the current head of its main channel."""
        return self._reader.run(require_uuid("run_id", run_id))

    def operation(self, operation_id: str) -> OperationRecord | None:
        """The command recorded under ``operation_id``, or ``None`` if it never ran."""
        return operation_record_of(
            self._reader.operation(require_text("operation_id", operation_id))
        )

    def now(self) -> datetime:
        """The store's clock: the database's on PostgreSQL, unless ``actae.open`` got one."""
        return self._service.clock()

    def clock_skew(self) -> float | None:
        """Seconds the database's clock is ahead of this host's (None: not on its clock)."""
        return host_skew(self._service.clock)

    def lineage(self, run_id: UUID | str) -> Lineage:
        """Fork receipts of a run: ancestors (nearest first) and all descendants."""
        return self._reader.lineage(require_uuid("run_id", run_id))

    def position(self) -> int:
        """The store's latest global position: the position of its newest event, 0 when empty.

        Compare with ``Projector.position()`` (how far the read models have got), or
        ``subscribe(after=store.position())`` to follow only what comes next.
        """
        return self._service.recorder.max_notification_id() or 0

    def on_commit(self, listener: Callable[[Sequence[object]], None]) -> None:
        """Call ``listener(events)`` after each write of this store commits, before it returns.

        In this process only, and synchronously: for instrumentation and for tests that
        must act at that exact moment (the failure drill kills a worker there). Subscribers
        in other processes use :meth:`subscribe`.
        """
        self._service.commit_listeners.append(listener)

    # -- subscriptions --------------------------------------------------------------------

    def subscribe(
        self,
        channel_id: UUID | str | None = None,
        after: int = 0,
        *,
        batch_size: int = 500,
        poll_interval: float = 0.1,
    ) -> Subscription:
        """Deliver every event after ``after``, stored ones first, then live, until stopped.

        With a ``channel_id``, ``after`` is a cursor of that channel; without one, events of
        all channels arrive in the store's global order and ``after`` is a global position
        (``ChannelEvent.position``; 0 = from the beginning). Use it as a context manager.
        """
        return self._subscription(
            channel_id, after, batch_size=batch_size, poll_interval=poll_interval, waiter=None
        )

    def _subscription(
        self,
        channel_id: UUID | str | None,
        after: int,
        *,
        batch_size: int,
        poll_interval: float,
        waiter: Waiter | None,
    ) -> Subscription:
        """:meth:`subscribe`, waiting with ``waiter`` (``None``: the backend's own)."""
        after = require_int("after", after, minimum=0)
        batch_size = require_int("batch_size", batch_size, minimum=1)
        poll_interval = require_number("poll_interval", poll_interval, minimum=0.001, maximum=3600)
        reader = self._reader
        if channel_id is None:

            def fetch(position: int) -> list[ChannelEvent]:
                return reader.global_events(after=position, limit=batch_size)

            def position_of(event: ChannelEvent) -> int:
                return event.position or 0

        else:
            cid = require_uuid("channel_id", channel_id)
            head = reader.head_event(cid).originator_version
            if after > head:
                raise NotFoundError("cursor", after, f"channel {cid} ends at cursor {head}")

            def fetch(position: int) -> list[ChannelEvent]:
                stored = reader.event_range(cid, after=position, limit=batch_size)
                return [channel_event_of(event) for event in stored]

            def position_of(event: ChannelEvent) -> int:
                return event.cursor

        return Subscription(
            fetch,
            self._waiter() if waiter is None else waiter,
            after=after,
            position_of=position_of,
            poll_interval=poll_interval,
        )

    # -- read models ----------------------------------------------------------------------

    def projector(self, *, batch_size: int = 2000, out: TextIO | None = None) -> Projector:
        """The store's projector (created on first use, closed with the store).

        ``catch_up()`` brings the read models (docs/read-models.md) up to date, ``start()``
        follows live in a thread, ``query(sql)`` reads them.
        """
        batch_size = require_int("batch_size", batch_size, minimum=1)
        if self._projector is None:
            db = self._backend.read_models()
            try:
                self._projector = Projector(
                    self._service,
                    db,
                    self._waiter,
                    backend=self._backend,
                    batch_size=batch_size,
                    out=out,
                )
            except BaseException:
                db.close()  # the read models could not be made (a turn not given, say)
                raise
        return self._projector

    def _waiter(self) -> Waiter:
        """Woken by this process's commits; other processes' are found by looking again."""
        return ConditionWaiter(self._service.written)

    # -- lifecycle ------------------------------------------------------------------------

    def close(self) -> None:
        """Release every connection. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        with contextlib.ExitStack() as parts:  # each part is closed, whichever one fails
            parts.callback(self._backend.close)
            parts.callback(close_clock, self._service.clock)
            parts.callback(self._service.close)
            if self._projector is not None:
                parts.callback(self._projector.close)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class RunContext:
    """One worker's handle on one run: durable steps, guarded effects, tracked head.

    A worker sets ``lease`` (its lease on the run) and ``outage`` (its outage log): the
    context then stops at a step boundary once the lease may be someone else's, and waits
    out a database outage to record a result for as long as the lease holds. Each call is a
    span in the run's trace (``trace``, docs/telemetry.md).
    """

    lease: RunLease | None = None

    def __init__(
        self,
        store: Store,
        service: ActaeService,
        run: RunInfo,
        worker: str,
        *,
        redact: Redactor | None = None,
    ) -> None:
        self.store = store
        self.run = run
        self.worker = worker
        self.redact = redact
        """The workflow's redactor: run on what its steps, records and effects return."""
        self._service = service
        self._reader = service.reader
        self._occurrences: Counter[tuple[str, str]] = Counter()
        self._head = ChannelHead(service.reader, run.channel_id)
        self.outage = Outage(f"run {run.run_id}", log.warning)
        self.trace = RunTrace(run, sealed=store.encrypting)
        self._inherited = Inheritance(service, run)
        self._ledger = RunLedger(
            service, run, self._head, worker=worker, redact=redact, durably=self._durably
        )

    @property
    def run_id(self) -> Any:
        """The run this context drives."""
        return self.run.run_id

    @property
    def head(self) -> Receipt:
        """The last channel event this context knows of."""
        return self._head.receipt

    def _key(self, kind: str, name: str) -> str:
        """The operation id of this call: run, kind, name and occurrence (now counted)."""
        key = self._next_key(kind, name)
        self._occurrences[(kind, name)] += 1
        return key

    def _next_key(self, kind: str, name: str) -> str:
        """The key the next ``_key(kind, name)`` returns (nothing is counted yet)."""
        count = self._occurrences[(kind, _named(kind, name))] + 1
        return f"{self.run.run_id}:{kind}:{name}:{count}"

    def _durably(self, write: Callable[[], T]) -> T:
        """``write()``, waited through a database outage while this worker holds the run.

        What precedes it already ran (a step, a tool call): unrecorded, it would run again.
        A transient failure is retried until the lease may be someone else's (their write
        would be refused anyway) or, outside a worker, for ``PATIENCE`` seconds.
        """
        lease = self.lease
        if lease is None:
            return ride_out(write, self.outage, within=PATIENCE)
        return ride_out(write, self.outage, give_up=lambda: lease.lost)

    # -- steps ----------------------------------------------------------------------------

    def checkpoint(self) -> RunInfo:
        """A step boundary: stop here unless the run may go on.

        Raises ``RunStoppedError`` if the run was paused, cancelled or ended, or is past its
        deadline (which fails it); ``RunSuspended`` if it waits.
        """
        return self._checkpoint(None)[0]

    def _checkpoint(self, key: str | None) -> tuple[RunInfo, OperationRecord | None]:
        """``checkpoint()``, reading the operation recorded under ``key`` in the same trip."""
        if self.lease is not None:
            self.lease.ensure_held()
        info, found = self._reader.run_and_operation(self.run.run_id, self.run.channel_id, key)
        ensure_may_go_on(self._service, info, self.worker)
        if info.cursor != self._head.receipt.cursor:
            self._head.adopt_notes()
        return info, operation_record_of(found)

    def step(
        self,
        name: str,
        fn: Callable[[], T],
        *,
        usage: Callable[[T], Mapping[str, float]] | Mapping[str, float] | None = None,
        retry: RetryPolicy | None = None,
    ) -> T:
        """Run ``fn`` once and record its (JSON) result; afterwards return the record.

        ``usage`` (a mapping, or a function of the result) records what the step consumed,
        e.g. ``{"input_tokens": 700, "output_tokens": 112, "cost": 0.02}``, checked against
        the run's budget. ``retry`` and a result that cannot be recorded: docs/api.md.
        """
        _, recorded = self._checkpoint(self._next_key("step", name))
        key = self._key("step", name)
        with self.trace.step(name, key) as call:
            if recorded is not None:
                call.answered(recorded.result["cursor"], recorded.result["state_version"])
                return cast(T, self._value_at(recorded.result["cursor"]))
            inherited = self._inherited.call(key)
            if inherited is not None:
                call.answered(inherited.cursor, inherited.state_version)
                return cast(T, inherited.contents()["value"])
            if self.run.retries:
                self._ledger.close_earlier_rounds(key)
            value, claim = (
                (fn(), None) if retry is None else self._ledger.step(key, name, fn, retry)
            )
            spent = usage(value) if callable(usage) else usage
            call.used(spent)
            call.ran(self._record_step(key, name, value, claim, spent))
            return value

    def _record_step(
        self,
        key: str,
        name: str,
        value: Any,
        claim: Claim | None,
        usage: Mapping[str, float] | None,
    ) -> Receipt:
        """Record a step's result; one that cannot be recorded fails the run, naming the step."""
        try:
            if claim is not None:  # the ledger holds it first: a crash now still replays it
                self._ledger.complete(self._ledger.attempts_key(key), claim.token, value)
            receipt = self._head.past_notes(
                lambda: self._durably(
                    lambda: self.store.record(
                        self.run.channel_id,
                        kind=STEP_RESULT,
                        payload={"name": name, "value": value},
                        expected_cursor=self._head.receipt.cursor,
                        operation_id=key,
                        usage=usage,
                        redact=self.redact,
                    )
                )
            )
        except ValidationError as error:
            reason = f"its result cannot be recorded: {error.reason}"
            self.store.fail_run(self.run.run_id, f"step {name!r}: {reason}", actor=self.worker)
            raise ValidationError(f"step {name!r}", reason) from error
        self._head.adopt(receipt)
        return receipt

    def effect(
        self,
        name: str,
        fn: Callable[[str, int], T],
        *,
        idempotent: bool = False,
        reconcile: Reconcile | None = None,
        lease: float = 30.0,
        retry: RetryPolicy | None = None,
        request: dict[str, Any] | None = None,
        timeout: float | None = None,
    ) -> T:
        """Run a side effect at most once, guarded by the ledger (docs/api.md).

        ``fn(idempotency_key, fencing_token)`` does the effect; pass both to the provider.
        An earlier attempt in doubt is settled by ``reconcile(key)``, else retried if
        ``idempotent``, else stopped for review. The attempt must be over ``timeout``
        seconds after its claim (default ``lease``; ``actae.current_deadline()`` in ``fn``).
        """
        self.checkpoint()
        key = self._key("effect", name)
        with self.trace.effect(name, key) as call:
            inherited, value = self._inherited.effect(key)
            if inherited:
                call.replayed_outcome()
                return cast(T, value)
            return self._ledger.effect(
                call,
                name,
                key,
                fn,
                idempotent=idempotent,
                reconcile=reconcile,
                lease=lease,
                retry=retry,
                request=request,
                timeout=timeout,
            )

    def record(self, kind: str, payload: dict[str, Any]) -> Receipt:
        """Record an event on the run's channel (once, also across re-runs)."""
        _, recorded = self._checkpoint(self._next_key("record", kind))
        key = self._key("record", kind)
        if (replayed := self._replayed(key, recorded)) is not None:
            return replayed
        receipt = self.store.record(
            self.run.channel_id,
            kind=kind,
            payload=payload,
            expected_cursor=self._head.receipt.cursor,
            operation_id=key,
            redact=self.redact,
        )
        self._head.adopt(receipt)
        return receipt

    def transition(
        self,
        *,
        state: dict[str, Any],
        kind: str = "transition",
        payload: dict[str, Any] | None = None,
    ) -> Receipt:
        """Commit the next state version (once, also across re-runs).

        A re-run replays the recorded transition by its position in the workflow, whatever
        state the code computes now: after a schema migration the code may build the same
        step's state differently, and the history, not the new code, says what happened.
        """
        _, recorded = self._checkpoint(self._next_key("transition", kind))
        key = self._key("transition", kind)
        with self.trace.transition(key) as call:
            receipt = self._replayed(key, recorded)
            if receipt is None:
                receipt = self.store.transition(
                    self.run.channel_id,
                    kind=kind,
                    payload=payload or {},
                    state=state,
                    expected_version=self._head.receipt.state_version,
                    expected_cursor=self._head.receipt.cursor,
                    operation_id=key,
                )
                self._head.adopt(receipt)
            call.recorded(receipt)
        return receipt

    def _replayed(self, key: str, recorded: OperationRecord | None) -> Receipt | None:
        """The receipt of the write ``key`` recorded earlier, or inherited from a fork."""
        if recorded is not None:
            at = recorded.result
            return _replay(
                self.run.channel_id, at["cursor"], at["state_version"], recorded.operation_id
            )
        event = self._inherited.call(key)
        if event is None:
            return None
        return _replay(event.channel_id, event.cursor, event.state_version, event.operation_id)

    def state(self) -> dict[str, Any]:
        """The state version in force at this context's head."""
        return self.store.state_at(self.run.channel_id, cursor=self._head.receipt.cursor).state

    def _value_at(self, cursor: int) -> Any:
        (event,) = self.store.events(self.run.channel_id, after=cursor - 1, limit=1)
        return event.contents()["value"]

    # -- waits and children ---------------------------------------------------------------

    def wait_for_approval(
        self, name: str, *, expires_in: float | None = None, on_expiry: str = "fail"
    ) -> Decision:
        """Wait (durably) until someone calls ``store.approve``/``store.deny`` for ``name``.

        Returns the decision (``decision.approved``). If ``expires_in`` seconds pass first,
        the run fails (``on_expiry="fail"``) or stays waiting marked escalated
        (``"escalate"``). Raises ``RunSuspended`` while waiting: the worker lets go and the
        workflow runs again from the top once decided.
        """
        return self._wait("approval", name, seconds=expires_in, on_expiry=on_expiry)

    def wait_for_signal(self, name: str, *, timeout: float | None = None) -> Decision:
        """Wait until ``store.signal(run_id, name, payload)`` (after ``timeout`` s: ``expired``)."""
        return self._wait("signal", name, seconds=timeout)

    def sleep(self, seconds: float) -> None:
        """Wait durably for ``seconds`` on the store's clock (survives restarts)."""
        self._wait("timer", self._key("sleep", "timer"), seconds=seconds)

    def start_child(
        self,
        workflow_id: str,
        *,
        agent_id: str,
        state: dict[str, Any],
        pins: dict[str, Any] | None = None,
    ) -> RunInfo:
        """Start a child run once (a re-run returns the same child, whatever it passes now)."""
        _, recorded = self._checkpoint(self._next_key("child", workflow_id))
        key = self._key("child", workflow_id)
        if recorded is not None:
            return self.store.run(recorded.result["run_id"])
        with self.trace.joined():  # the child's trace continues from where the parent is
            return self.store.start_run(
                workflow_id,
                agent_id=agent_id,
                state=state,
                pins=pins,
                parent_run_id=self.run.run_id,
                operation_id=key,
            )

    def wait_for_child(self, child: RunInfo) -> Decision:
        """Wait until the child completes or fails (its ``status``, ``result``, ``error``)."""
        return self._wait("child", f"child:{child.run_id}")

    def _wait(
        self, reason: str, name: str, *, seconds: float | None = None, on_expiry: str | None = None
    ) -> Decision:
        """The decision the run got for its wait; else it starts waiting (``RunSuspended``)."""
        with self.trace.wait(reason, name):
            info = self.store.run(self.run.run_id)
            decided = info.decisions.get(name) or self._inherited.decision(name)
            if decided is not None:
                if info.status in STOPPED:
                    raise RunStoppedError(info.run_id, status=info.status.value)
                return decided
            self.checkpoint()
            info = self.store.suspend(
                self.run.run_id,
                reason=reason,
                name=name,
                seconds=seconds,
                on_expiry=on_expiry if reason == "approval" else None,
            )
            decided = info.decisions.get(name)
            if decided is not None:  # it came between the look and the wait: the run goes on
                return decided
            self._head.refresh()
            until = info.waiting.until if info.waiting else None
            raise RunSuspended(info.run_id, reason=reason, name=name, until=until)


def _replay(channel_id: UUID, cursor: int, state_version: int, operation_id: str | None) -> Receipt:
    return Receipt(
        channel_id=channel_id,
        cursor=cursor,
        state_version=state_version,
        operation_id=operation_id,
        replayed=True,
    )


NAME_FIELDS = {"record": "kind", "transition": "kind", "child": "workflow_id"}
"""The argument a call's name comes from, when it is not ``name``."""


def _named(kind: str, name: str) -> str:
    """``name``, checked before it becomes part of an operation id (and of nothing else)."""
    return require_text(NAME_FIELDS.get(kind, "name"), name)


def _reference(ref: object) -> ArtifactRef:
    """``ref`` as an :class:`ArtifactRef`: one, its JSON form, or a stored event's marker."""
    if isinstance(ref, ArtifactRef):
        return ref
    try:
        inside = reference_in(ref)
        if inside is not None:
            return inside
        return ArtifactRef.model_validate(ref)
    except pydantic.ValidationError as error:
        problem = error.errors()[0]
        where = ".".join(str(part) for part in problem["loc"]) or "ref"
        raise ValidationError(f"ref.{where}", problem["msg"]) from None
