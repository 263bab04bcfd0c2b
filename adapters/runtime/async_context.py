"""Durable steps for async workflow code: ``await store.resume(...)`` gives an AsyncRunContext.

Each method is the ``RunContext`` one, run in a greenback portal on the loop (docs/async.md).
Calls take turns to record, in the order they were made, and a call lets go of its turn
while its ``fn`` runs: that is what lets ``ctx.gather`` fan out.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, Concatenate, ParamSpec, TypeVar, overload

from actae.adapters.persistence.awaiting import awaiting, run_in_portal, thread_pool
from actae.adapters.runtime.deadlines import by_deadline, current_deadline
from actae.adapters.runtime.run_ledger import Reconcile
from actae.adapters.runtime.store import RunContext
from actae.domain.effects import RetryPolicy
from actae.domain.values import Receipt, RunInfo

T = TypeVar("T")
P = ParamSpec("P")


def _awaited(
    method: Callable[Concatenate[RunContext, P], T],
) -> Callable[Concatenate[AsyncRunContext, P], Coroutine[Any, Any, T]]:
    """The sync context's ``method`` as a coroutine of the async one, run in its turn."""

    @functools.wraps(method)
    async def awaited(self: AsyncRunContext, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._in_turn(method, self.sync, *args, **kwargs)

    awaited.__qualname__ = f"AsyncRunContext.{method.__name__}"
    return awaited


class AsyncRunContext:
    """One worker's handle on one run, for ``async def`` workflows (see the module doc)."""

    def __init__(self, context: RunContext) -> None:
        self.sync = context
        self.run: RunInfo = context.run
        """The run as it was when this context was made."""
        self.run_id: Any = context.run_id
        self.worker: str = context.worker
        """The worker driving the run."""
        self._turn = asyncio.Lock()

    @property
    def head(self) -> Receipt:
        """The last channel event this context knows of."""
        return self.sync.head

    @overload
    async def step(
        self,
        name: str,
        fn: Callable[[], Awaitable[T]],
        *,
        usage: Callable[[T], Mapping[str, float]] | Mapping[str, float] | None = None,
        retry: RetryPolicy | None = None,
    ) -> T: ...

    @overload
    async def step(
        self,
        name: str,
        fn: Callable[[], T],
        *,
        usage: Callable[[T], Mapping[str, float]] | Mapping[str, float] | None = None,
        retry: RetryPolicy | None = None,
    ) -> T: ...

    async def step(self, name: str, fn: Callable[[], Any], **options: Any) -> Any:
        """``RunContext.step``: run ``fn`` once (awaited if async) and record its result."""
        return await self._in_turn(self.sync.step, name, self._released(fn), **options)

    @overload
    async def effect(
        self,
        name: str,
        fn: Callable[[str, int], Awaitable[T]],
        *,
        idempotent: bool = False,
        reconcile: Callable[[str], Any] | None = None,
        lease: float = 30.0,
        retry: RetryPolicy | None = None,
        request: dict[str, Any] | None = None,
        timeout: float | None = None,
    ) -> T: ...

    @overload
    async def effect(
        self,
        name: str,
        fn: Callable[[str, int], T],
        *,
        idempotent: bool = False,
        reconcile: Callable[[str], Any] | None = None,
        lease: float = 30.0,
        retry: RetryPolicy | None = None,
        request: dict[str, Any] | None = None,
        timeout: float | None = None,
    ) -> T: ...

    async def effect(
        self,
        name: str,
        fn: Callable[[str, int], Any],
        *,
        reconcile: Callable[[str], Any] | None = None,
        **options: Any,
    ) -> Any:
        """``RunContext.effect``; an async ``fn`` is cancelled at the attempt's deadline."""
        settle: Reconcile | None = None if reconcile is None else self._released(reconcile)
        effect = self.sync.effect
        return await self._in_turn(effect, name, self._released(fn), reconcile=settle, **options)

    # The calls that take no function of the workflow's: the sync context's, awaited.
    record = _awaited(RunContext.record)
    transition = _awaited(RunContext.transition)
    state = _awaited(RunContext.state)
    checkpoint = _awaited(RunContext.checkpoint)
    sleep = _awaited(RunContext.sleep)
    wait_for_approval = _awaited(RunContext.wait_for_approval)
    wait_for_signal = _awaited(RunContext.wait_for_signal)
    start_child = _awaited(RunContext.start_child)
    wait_for_child = _awaited(RunContext.wait_for_child)

    async def gather(self, *calls: Awaitable[Any]) -> list[Any]:
        """Await ``calls`` concurrently (fan-out); their results, in order.

        Every call runs to its end, recorded, before the first failure is raised: a failing
        branch neither leaves the others running nor cancels one mid-effect.
        """
        results = await asyncio.gather(*calls, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return list(results)

    async def _in_turn(self, method: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``method(*args, **kwargs)`` of the sync context, one call at a time."""
        await self._turn.acquire()
        turn = _Turn()
        mine = _HELD.set(turn)
        try:
            return await run_in_portal(method, *args, **kwargs)
        finally:
            _HELD.reset(mine)
            if turn.held:  # not if cancelled while waiting to take it back
                self._turn.release()

    def _released(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` as the sync context calls it: awaited, with the turn let go meanwhile.

        A plain function runs in the step pool, never the loop's small default executor,
        which the store's own calls must not wait behind.
        """

        def call(*args: Any) -> Any:
            turn = _HELD.get()
            self._turn.release()
            turn.held = False
            try:
                if inspect.iscoroutinefunction(fn):
                    return awaiting(self._by_deadline(fn(*args)))
                result = awaiting(_in_a_thread(fn, *args))
                if inspect.isawaitable(result):
                    return awaiting(self._by_deadline(result))
                return result
            finally:
                awaiting(self._turn.acquire())
                turn.held = True

        return call

    def _by_deadline(self, awaitable: Awaitable[T]) -> Awaitable[T]:
        """``awaitable``, cancelled at the current effect attempt's deadline (if in one)."""
        deadline = current_deadline()
        if deadline is None:
            return awaitable
        return by_deadline(awaitable, deadline, self.sync.store.now)


class _Turn:
    """Whether the current call holds its context's turn (a cancelled one may not)."""

    held = True


_HELD: contextvars.ContextVar[_Turn] = contextvars.ContextVar("actae_turn")

STEP_THREADS = 64
"""Threads for plain (blocking) step and effect functions of async workflows, per process."""


def _in_a_thread(fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
    """``fn(*args)`` in a thread of the step pool, in a copy of the caller's context."""
    call = functools.partial(contextvars.copy_context().run, fn, *args)
    pool = thread_pool("actae-step", STEP_THREADS)
    return asyncio.get_running_loop().run_in_executor(pool, call)
