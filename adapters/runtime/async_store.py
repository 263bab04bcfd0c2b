"""The asyncio face of the store: ``actae.open_async(url)`` and ``AsyncStore``.

Each method is the ``Store`` one, run in a greenback portal on the loop's thread: one
implementation of every command, query and error (docs/async.md, "How it works").
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import datetime
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, Self, TypeVar
from uuid import UUID

from actae.adapters.persistence.awaiting import run_in_portal
from actae.adapters.readside.async_subscription import AsyncSubscription, CommitSignal, SignalWaiter
from actae.adapters.readside.projector import Projector
from actae.adapters.readside.subscription import Subscription, Unwaited
from actae.adapters.runtime.async_context import AsyncRunContext
from actae.adapters.runtime.store import RunContext, Store, open
from actae.domain.redaction import Redactor

P = ParamSpec("P")
T = TypeVar("T")


def _opening(opens: Callable[P, Store]) -> Callable[P, AbstractAsyncContextManager[AsyncStore]]:
    """``open_async`` from ``actae.open``: the same arguments, an ``AsyncStore`` for a block."""

    @asynccontextmanager
    async def open_async(*args: P.args, **kwargs: P.kwargs) -> AsyncIterator[AsyncStore]:
        """``actae.open``'s store for asyncio code, closed when the ``async with`` block ends."""
        store = await asyncio.to_thread(opens, *args, **kwargs)
        async with AsyncStore(store) as opened:
            yield opened

    signature = inspect.signature(opens).replace(return_annotation="AsyncIterator[AsyncStore]")
    open_async.__signature__ = signature  # type: ignore[attr-defined]
    open_async.__qualname__ = "open_async"
    return open_async


def _awaited(
    method: Callable[Concatenate[Store, P], T],
) -> Callable[Concatenate[AsyncStore, P], Coroutine[Any, Any, T]]:
    """``AsyncStore``'s coroutine for the ``Store`` method ``method``: same arguments, result."""

    async def awaited(self: AsyncStore, /, *args: P.args, **kwargs: P.kwargs) -> T:
        result: T = await run_in_portal(method, self.sync, *args, **kwargs)
        return result

    coroutine = functools.wraps(method)(awaited)
    coroutine.__qualname__ = f"AsyncStore.{method.__name__}"  # as warnings and tracebacks say
    return coroutine


def _resumed(
    method: Callable[Concatenate[Store, P], RunContext],
) -> Callable[Concatenate[AsyncStore, P], Coroutine[Any, Any, AsyncRunContext]]:
    """``AsyncStore.resume`` from ``Store.resume``: the same arguments, an async run context."""

    async def resume(self: AsyncStore, /, *args: P.args, **kwargs: P.kwargs) -> AsyncRunContext:
        """``Store.resume``, for ``async def`` workflow code: an :class:`AsyncRunContext`."""
        context: RunContext = await run_in_portal(method, self.sync, *args, **kwargs)
        return AsyncRunContext(context)

    resume.__qualname__ = "AsyncStore.resume"
    signature = inspect.signature(method).replace(return_annotation="AsyncRunContext")
    resume.__signature__ = signature  # type: ignore[attr-defined]
    return resume


class AsyncStore:
    """A durable-execution store for asyncio code: ``Store``'s methods, as coroutines.

    ``async with AsyncStore(store)`` wraps a ``Store`` you opened (and closes it); ``sync`` is
    that store, for code in a thread of its own. The methods that do no IO stay plain.
    """

    def __init__(self, store: Store) -> None:
        self.sync = store
        self._backend = store._backend
        self._signal: CommitSignal | None = None
        self._connected = False
        self._closed = False

    async def connect(self) -> None:
        """Open the connections the coroutines use (``async with`` and ``open_async`` do)."""
        if not self._connected:
            await self._backend.connect_async()
        self._connected = True

    def __repr__(self) -> str:
        return f"<actae.AsyncStore {self.sync.url}>"

    @property
    def url(self) -> str:
        """The store URL, password masked."""
        return self.sync.url

    @property
    def redactor(self) -> Redactor | None:
        """``Store.redactor``: the redactor given as ``actae.open_async(redact=)``."""
        return self.sync.redactor

    @property
    def encrypting(self) -> bool:
        """``Store.encrypting``: whether this store encrypts what agents produce."""
        return self.sync.encrypting

    def now(self) -> datetime:
        """The store's clock (no IO: the database's is sampled in the background)."""
        return self.sync.now()

    def clock_skew(self) -> float | None:
        """Seconds the database's clock is ahead of this host's (None: not on its clock)."""
        return self.sync.clock_skew()

    def on_commit(self, listener: Callable[..., None]) -> None:
        """``Store.on_commit``: ``listener(events)`` after each write of this store commits."""
        self.sync.on_commit(listener)

    def projector(self, **kwargs: Any) -> Projector:
        """``Store.projector``; its IO blocks: ``await asyncio.to_thread(projector.catch_up)``."""
        return self.sync.projector(**kwargs)

    resume = _resumed(Store.resume)

    # -- commands -------------------------------------------------------------------------

    start_run = _awaited(Store.start_run)
    record = _awaited(Store.record)
    transition = _awaited(Store.transition)
    fork = _awaited(Store.fork)

    # -- waits and operator actions -------------------------------------------------------

    suspend = _awaited(Store.suspend)
    signal = _awaited(Store.signal)
    approve = _awaited(Store.approve)
    deny = _awaited(Store.deny)
    wake_due = _awaited(Store.wake_due)
    pause = _awaited(Store.pause)
    unpause = _awaited(Store.unpause)
    retry_run = _awaited(Store.retry_run)
    cancel = _awaited(Store.cancel)
    forget = _awaited(Store.forget)
    rotate_keys = _awaited(Store.rotate_keys)
    put_artifact = _awaited(Store.put_artifact)
    set_retention = _awaited(Store.set_retention)
    retention = _awaited(Store.retention)
    hold = _awaited(Store.hold)
    release = _awaited(Store.release)
    apply_retention = _awaited(Store.apply_retention)
    open_artifact = _awaited(Store.open_artifact)
    complete_run = _awaited(Store.complete_run)
    fail_run = _awaited(Store.fail_run)

    # -- the effect ledger ----------------------------------------------------------------

    claim = _awaited(Store.claim)
    heartbeat = _awaited(Store.heartbeat)
    complete_effect = _awaited(Store.complete_effect)
    doubt_effect = _awaited(Store.doubt_effect)
    fail_effect = _awaited(Store.fail_effect)
    reconcile = _awaited(Store.reconcile)
    override = _awaited(Store.override)
    abandon = _awaited(Store.abandon)
    effect = _awaited(Store.effect)
    find_effect = _awaited(Store.find_effect)

    # -- queries --------------------------------------------------------------------------

    head = _awaited(Store.head)
    state_at = _awaited(Store.state_at)
    events = _awaited(Store.events)
    recover = _awaited(Store.recover)
    run = _awaited(Store.run)
    operation = _awaited(Store.operation)
    lineage = _awaited(Store.lineage)
    position = _awaited(Store.position)

    # -- subscriptions --------------------------------------------------------------------

    def subscribe(
        self,
        channel_id: UUID | str | None = None,
        after: int = 0,
        *,
        batch_size: int = 500,
        poll_interval: float = 0.1,
    ) -> AsyncSubscription:
        """``Store.subscribe`` for ``async with``/``async for``, checked when entered."""

        async def start() -> Subscription:
            subscription: Subscription = await run_in_portal(
                self.sync._subscription,
                channel_id,
                after,
                batch_size=batch_size,
                poll_interval=poll_interval,
                waiter=Unwaited(),
            )
            return subscription

        return AsyncSubscription(start, self._waiter)

    def _waiter(self) -> SignalWaiter:
        if self._signal is None:
            self._signal = CommitSignal()
            self.sync.on_commit(self._signal.committed)
        return self._signal.waiter()

    # -- closing --------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Release every connection. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        await self._backend.close_async()
        await asyncio.to_thread(self.sync.close)

    async def __aenter__(self) -> Self:
        try:
            await self.connect()
        except BaseException:
            await self.aclose()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


open_async = _opening(open)
