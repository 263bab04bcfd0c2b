"""The savers a graph is compiled with: ``ActaeSaver`` (a ``Store``), ``AsyncActaeSaver``.

The translation is written once, as blocking code; ``AsyncActaeSaver``'s coroutines run those
very methods in a greenback portal, so the two cannot drift apart.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine, Generator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import replace
from typing import Any, Concatenate, Generic, ParamSpec, Self, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from actae.adapters.langgraph import copying, forgetting, reading, threads, writing
from actae.adapters.langgraph.encoding import thread_id_of
from actae.adapters.langgraph.threads import Context
from actae.adapters.persistence.awaiting import in_portal, run_in_portal
from actae.adapters.runtime.async_store import AsyncStore, open_async
from actae.adapters.runtime.store import Store, open
from actae.domain.redaction import Redactor
from actae.domain.validation import require_text
from actae.domain.values import RunInfo

P = ParamSpec("P")
T = TypeVar("T")
S = TypeVar("S", Store, AsyncStore)


class _Saver(BaseCheckpointSaver[int], Generic[S]):
    """LangGraph's blocking checkpointer calls on a ``Store`` (their docstrings: LangGraph's)."""

    def __init__(
        self,
        store: S,
        *,
        serde: SerializerProtocol | None = None,
        workflow_id: str = "langgraph",
        agent_id: str = "langgraph",
    ) -> None:
        super().__init__(serde=serde)
        self.store: S = store
        core = store.sync if isinstance(store, AsyncStore) else store
        self.redact = core.redactor  # the store's, run on what the serde blobs hold
        self.workflow_id = require_text("workflow_id", workflow_id, max_length=100)
        self.agent_id = require_text("agent_id", agent_id)
        self._memory = Context(core, self.serde, self.workflow_id, self.agent_id, self.redact)
        self.loop = _running_loop()  # or its first coroutine's: a blocking call there stalls

    def _context(self) -> Context:
        # Made per call, sharing the memory: LangGraph's with_allowlist copies a saver and
        # swaps its serde, and the attributes are public.
        return replace(
            self._memory,
            serde=self.serde,
            workflow_id=self.workflow_id,
            agent_id=self.agent_id,
            redact=self.redact,
        )

    def thread_run(self, thread_id: str) -> RunInfo | None:
        """The Actae run that holds ``thread_id`` (``store.run`` of it), if it has one."""
        ctx = self._context()
        root = threads.find_thread(ctx, thread_id_of(thread_id))
        return None if root is None else ctx.store.run(root.run_id)

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return reading.get_tuple(self._context(), config)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Generator[CheckpointTuple, None, None]:
        yield from reading.list_checkpoints(self._context(), config, before, filter, limit)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return writing.put(self._context(), config, checkpoint, metadata)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        writing.put_writes(self._context(), config, writes, (task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        forgetting.delete_thread(self._context(), thread_id_of(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        forgetting.delete_for_runs(self._context(), run_ids)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        ctx = self._context()
        copying.copy_thread(ctx, thread_id_of(source_thread_id), thread_id_of(target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        threads = [thread_id_of(thread_id) for thread_id in thread_ids]
        forgetting.prune(self._context(), threads, strategy)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """:meth:`list`, a checkpoint at a time, read where the coroutines run; stop any time."""
        items = self.list(config, filter=filter, before=before, limit=limit)
        try:
            while (item := await self._call(next, items, None)) is not None:
                yield item
        finally:
            items.close()

    athread_run: Callable[[str], Coroutine[Any, Any, RunInfo | None]]
    """:meth:`thread_run` awaited; like every ``a<name>`` below, made by :func:`_coroutine`."""

    async def _call(self, method: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """``method(*args, **kwargs)``, awaited where the saver's coroutines run it."""
        return await asyncio.to_thread(method, *args, **kwargs)  # ActaeSaver's: in a thread


def _coroutine(method: Callable[Concatenate[_Saver[Any], P], T]) -> Any:
    """The coroutine twin ``a<name>`` of a blocking method: the saver's ``_call`` runs it."""

    async def coroutine(self: _Saver[Any], /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._call(method, self, *args, **kwargs)

    coroutine.__name__ = coroutine.__qualname__ = f"a{method.__name__}"
    coroutine.__doc__ = f"The blocking :meth:`{method.__name__}`, awaited."
    return coroutine


for _name in (
    "thread_run",
    "get_tuple",
    "put",
    "put_writes",
    "delete_thread",
    "delete_for_runs",
    "copy_thread",
    "prune",
):
    setattr(_Saver, f"a{_name}", _coroutine(getattr(_Saver, _name)))


class ActaeSaver(_Saver[Store]):
    """A LangGraph checkpointer on an Actae ``Store`` (docs/langgraph.md).

    ``with ActaeSaver.from_url(url) as saver`` opens and closes the store; ``ActaeSaver(store)``
    uses yours.
    """

    @classmethod
    @contextmanager
    def from_url(
        cls,
        url: str,
        *,
        serde: SerializerProtocol | None = None,
        workflow_id: str = "langgraph",
        agent_id: str = "langgraph",
        redact: Redactor | bool | None = None,
        keyring: str | None = None,
    ) -> Iterator[Self]:
        """A saver on ``actae.open(url, redact=, keyring=)``, closed when the block ends."""
        with open(url, redact=redact, keyring=keyring) as store:
            yield cls(store, serde=serde, workflow_id=workflow_id, agent_id=agent_id)


class AsyncActaeSaver(_Saver[AsyncStore]):
    """A LangGraph checkpointer on an Actae store, for ``ainvoke``/``astream``.

    ``async with AsyncActaeSaver.from_url(url) as saver`` opens and closes the store. Its
    blocking methods work from any thread but its event loop's, which they would stall.
    """

    @classmethod
    @asynccontextmanager
    async def from_url(
        cls,
        url: str,
        *,
        serde: SerializerProtocol | None = None,
        workflow_id: str = "langgraph",
        agent_id: str = "langgraph",
        redact: Redactor | bool | None = None,
        keyring: str | None = None,
    ) -> AsyncIterator[Self]:
        """A saver on ``actae.open_async(url, redact=, keyring=)``, closed when the block ends."""
        async with open_async(url, redact=redact, keyring=keyring) as store:
            yield cls(store, serde=serde, workflow_id=workflow_id, agent_id=agent_id)

    async def _call(self, method: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """The blocking method in a greenback portal: where the store would block, it awaits."""
        self.loop = self.loop or _running_loop()
        return await run_in_portal(method, *args, **kwargs)

    def _context(self) -> Context:
        running = None if in_portal() else _running_loop()
        if running is not None and self.loop in (None, running):  # any loop, before its own
            raise asyncio.InvalidStateError(
                "AsyncActaeSaver's blocking methods would stall its event loop, called on "
                "it: on that loop use the coroutines (await saver.aget_tuple(...), "
                "graph.ainvoke(...)), call from another thread, or use ActaeSaver"
            )
        return super()._context()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
