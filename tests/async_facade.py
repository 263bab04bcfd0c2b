"""The sync contract's cases, run against ``AsyncStore``: a blocking face over the coroutines.

:class:`BlockingAsyncStore` owns an event loop in a thread and an ``AsyncStore`` opened on it.
Each method of ``Store`` that ``AsyncStore`` has as a coroutine is sent to that loop and
waited for, so a contract test written for ``Store`` drives the async path unchanged: the
same arguments, the same results, the same errors. Subscriptions are driven through
``async with``/``async for`` the same way. Anything else (``now``, ``projector``, the
internals a test may inspect) is the underlying ``Store``'s. ``resume`` gives the blocking face
of an ``AsyncRunContext``, so the run-context cases drive the async context as well.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import threading
from collections.abc import Coroutine
from types import TracebackType
from typing import Any, Self, TypeVar

import actae
from actae.adapters.readside.async_subscription import AsyncSubscription
from actae.adapters.runtime.async_context import AsyncRunContext
from actae.adapters.runtime.async_store import AsyncStore, open_async

T = TypeVar("T")


class LoopThread:
    """An event loop running in a daemon thread; ``run(coro)`` blocks for its result."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """The coroutine's result or error, ``SystemExit`` included.

        Tests stand for a kill with ``SystemExit``; asyncio would let it stop the loop, and
        the test goes on with the same store afterwards, so it is handed back instead.
        """
        outcome: concurrent.futures.Future[T] = concurrent.futures.Future()

        async def reporting() -> None:
            try:
                outcome.set_result(await coroutine)
            except BaseException as error:
                outcome.set_exception(error)

        asyncio.run_coroutine_threadsafe(reporting(), self.loop)
        return outcome.result()

    def owns_this_thread(self) -> bool:
        """Whether the caller runs on the loop (a test's hook inside a store call)."""
        return threading.current_thread() is self._thread

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


class BlockingSubscription:
    """An ``AsyncSubscription`` iterated from a thread, as a ``Subscription`` is."""

    def __init__(self, loop: LoopThread, subscription: AsyncSubscription) -> None:
        self._loop = loop
        self._subscription = subscription
        self._entered = False

    @property
    def position(self) -> int:
        return self._subscription.position

    def _enter(self) -> None:
        if not self._entered:
            self._loop.run(self._subscription.__aenter__())
            self._entered = True

    def __enter__(self) -> Self:
        self._enter()
        return self

    def __iter__(self) -> Self:
        self._enter()
        return self

    def __next__(self) -> actae.ChannelEvent:
        self._enter()
        try:
            return self._loop.run(self._subscription.__anext__())
        except StopAsyncIteration:
            raise StopIteration from None

    def stop(self) -> None:
        self._loop.loop.call_soon_threadsafe(self._subscription.stop)

    def close(self) -> None:
        if self._entered:
            self._loop.run(self._subscription.__aexit__(None, None, None))
        else:
            self.stop()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class Blocking:
    """Coroutine methods of ``target`` as blocking calls; anything else is ``fallback``'s."""

    def __init__(self, loop: LoopThread, target: Any, fallback: Any) -> None:
        object.__setattr__(self, "_loop", loop)
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_fallback", fallback)

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._target, name, None)
        if method is not None and inspect.iscoroutinefunction(method):

            def blocking(*args: Any, **kwargs: Any) -> Any:
                if self._loop.owns_this_thread():  # a test's hook inside a call: no loop trip
                    return getattr(self._fallback, name)(*args, **kwargs)
                return wrapped(self._loop, self._loop.run(method(*args, **kwargs)))

            return blocking
        return getattr(self._fallback, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._fallback, name, value)


def wrapped(loop: LoopThread, result: Any) -> Any:
    """An ``AsyncRunContext`` behind the blocking face too; any other result as it is."""
    if isinstance(result, AsyncRunContext):
        return Blocking(loop, result, result.sync)
    return result


class BlockingAsyncStore:
    """``Store``'s interface, every coroutine of ``AsyncStore`` behind it."""

    def __init__(self, url: str, **options: Any) -> None:
        self._loop = LoopThread()
        self._opening = open_async(url, **options)
        try:
            self.async_store: AsyncStore = self._loop.run(self._opening.__aenter__())
        except BaseException:
            self._loop.stop()
            raise
        self._closed = False

    def __getattr__(self, name: str) -> Any:
        return getattr(Blocking(self._loop, self.async_store, self.async_store.sync), name)

    def on_loop(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Await ``coroutine`` on the store's loop (an ``AsyncWorker``'s pass); its result."""
        return self._loop.run(coroutine)

    def subscribe(self, *args: Any, **kwargs: Any) -> BlockingSubscription:
        """Entered at once, so a bad argument fails here, as ``Store.subscribe`` does."""
        subscription = BlockingSubscription(self._loop, self.async_store.subscribe(*args, **kwargs))
        return subscription.__enter__()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._loop.run(self._opening.__aexit__(None, None, None))
            self._loop.stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
