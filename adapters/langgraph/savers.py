"""The savers a graph is compiled with: ``ActaeSaver`` (a ``Store``), ``AsyncActaeSaver``.

Each method builds its operation (:mod:`~actae.adapters.langgraph.reading`, ``writing``,
``forgetting``, ``copying``) and hands it to its driver; nothing here decides anything, so
the two savers cannot drift apart. Like LangGraph's own savers, each also answers the other
style of call: ``ActaeSaver``'s coroutines run its blocking methods in a thread, and
``AsyncActaeSaver``'s blocking methods, called from another thread than its event loop's,
wait for its coroutines on that loop (as ``AsyncPostgresSaver``'s do).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
from collections.abc import AsyncIterator, Coroutine, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any, Self, TypeVar
from uuid import UUID

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from actae.adapters.langgraph import copying, forgetting, reading, writing
from actae.adapters.langgraph.calls import Op, Stream
from actae.adapters.langgraph.drivers import aiterate, arun, iterate, run
from actae.adapters.langgraph.encoding import thread_id_of
from actae.adapters.langgraph.threads import Context, Ref, thread_run
from actae.adapters.runtime.async_store import AsyncStore, open_async
from actae.adapters.runtime.store import Store, open
from actae.domain.redaction import Redactor
from actae.domain.validation import require_text
from actae.domain.values import RunInfo

T = TypeVar("T")


class _Translating(BaseCheckpointSaver[int]):
    """What both savers share: the names runs get, the serializer, the runs found so far."""

    def __init__(
        self,
        *,
        serde: SerializerProtocol | None = None,
        workflow_id: str = "langgraph",
        agent_id: str = "langgraph",
        redact: Redactor | None = None,
    ) -> None:
        super().__init__(serde=serde)
        self.redact = redact
        """The store's redactor (``actae.open(redact=)``), run on what the serde blobs hold."""
        self.workflow_id = require_text("workflow_id", workflow_id, max_length=100)
        self.agent_id = require_text("agent_id", agent_id)
        self._runs: dict[str, Ref] = {}
        self._stored: dict[tuple[UUID, str], None] = {}
        self._early: dict[tuple[UUID, str], int] = {}

    def _context(self) -> Context:
        return Context(
            self.serde,
            self.workflow_id,
            self.agent_id,
            self._runs,
            self._stored,
            self._early,
            self.redact,
        )

    def _get_tuple(self, config: RunnableConfig) -> Op[CheckpointTuple | None]:
        return reading.get_tuple(self._context(), config)

    def _list(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> Stream:
        query = reading.Query.of(config, before, filter)
        return reading.list_checkpoints(self._context(), config, query, limit)

    def _put(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata
    ) -> Op[RunnableConfig]:
        return writing.put(self._context(), config, checkpoint, metadata)

    def _put_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, path: str
    ) -> Op[None]:
        return writing.put_writes(self._context(), config, writes, (task_id, path))

    def _delete_thread(self, thread_id: str) -> Op[None]:
        return forgetting.delete_thread(self._context(), thread_id_of(thread_id))

    def _delete_for_runs(self, run_ids: Sequence[str]) -> Op[None]:
        return forgetting.delete_for_runs(self._context(), run_ids)

    def _copy_thread(self, source: str, target: str) -> Op[None]:
        return copying.copy_thread(self._context(), thread_id_of(source), thread_id_of(target))

    def _prune(self, thread_ids: Sequence[str], strategy: str) -> Op[None]:
        threads = [thread_id_of(thread_id) for thread_id in thread_ids]
        return forgetting.prune(self._context(), threads, strategy)

    def _thread_run(self, thread_id: str) -> Op[RunInfo | None]:
        return thread_run(self._context(), thread_id_of(thread_id))


class ActaeSaver(_Translating):
    """A LangGraph checkpointer on an Actae ``Store``: ``builder.compile(checkpointer=saver)``.

    ``with ActaeSaver.from_url(url) as saver`` opens the store and closes it afterwards;
    ``ActaeSaver(store)`` uses a store you opened. A thread becomes a run of
    ``workflow_id`` (default ``"langgraph"``) for the agent named ``agent_id`` in the
    config's metadata, or the saver's ``agent_id``. docs/langgraph.md has the details.
    """

    def __init__(
        self,
        store: Store,
        *,
        serde: SerializerProtocol | None = None,
        workflow_id: str = "langgraph",
        agent_id: str = "langgraph",
    ) -> None:
        super().__init__(
            serde=serde, workflow_id=workflow_id, agent_id=agent_id, redact=store.redactor
        )
        self.store = store

    @classmethod
    @contextmanager
    def from_url(
        cls,
        url: str,
        *,
        serde: SerializerProtocol | None = None,
        workflow_id: str = "langgraph",
        agent_id: str = "langgraph",
    ) -> Iterator[Self]:
        """A saver on the store at ``url`` (``actae.open(url)``), closed when the block ends."""
        with open(url) as store:
            yield cls(store, serde=serde, workflow_id=workflow_id, agent_id=agent_id)

    def thread_run(self, thread_id: str) -> RunInfo | None:
        """The Actae run that holds ``thread_id`` (``store.run`` of it), if it has one."""
        return run(self.store, self._thread_run(thread_id))

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names, or the latest of its thread and namespace."""
        return run(self.store, self._get_tuple(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first: of ``config``'s thread, or of every thread for ``None``."""
        return iterate(self.store, self._list(config, filter, before, limit))

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store ``checkpoint`` (a transition on its thread's channel); the config naming it."""
        return run(self.store, self._put(config, checkpoint, metadata))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Record a task's pending writes for the checkpoint ``config`` names (idempotent)."""
        run(self.store, self._put_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        """Make the thread read as empty: an audited tombstone (the log keeps its history)."""
        run(self.store, self._delete_thread(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Make the checkpoints of these LangGraph runs read as gone (reads the whole log)."""
        run(self.store, self._delete_for_runs(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy a thread, as an Actae fork with its receipt."""
        run(self.store, self._copy_thread(source_thread_id, target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Keep each namespace's latest checkpoint visible (``keep_latest``), or none."""
        run(self.store, self._prune(thread_ids, strategy))

    # -- the coroutines, for a graph run with ainvoke: the methods above, in a thread --------

    async def athread_run(self, thread_id: str) -> RunInfo | None:
        """:meth:`thread_run`, in a worker thread."""
        return await asyncio.to_thread(self.thread_run, thread_id)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """:meth:`get_tuple`, in a worker thread."""
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """:meth:`list`, read in a worker thread."""

        def listed() -> builtins.list[CheckpointTuple]:
            return builtins.list(self.list(config, filter=filter, before=before, limit=limit))

        for item in await asyncio.to_thread(listed):
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """:meth:`put`, in a worker thread."""
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """:meth:`put_writes`, in a worker thread."""
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """:meth:`delete_thread`, in a worker thread."""
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """:meth:`delete_for_runs`, in a worker thread."""
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """:meth:`copy_thread`, in a worker thread."""
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """:meth:`prune`, in a worker thread."""
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)


class AsyncActaeSaver(_Translating):
    """A LangGraph checkpointer on an Actae store, for ``ainvoke``/``astream``.

    ``async with AsyncActaeSaver.from_url(url) as saver`` opens the store with
    ``actae.open_async(url)`` and closes it afterwards; ``AsyncActaeSaver(async_store)``
    uses an ``AsyncStore`` you opened.
    """

    def __init__(
        self,
        store: AsyncStore,
        *,
        serde: SerializerProtocol | None = None,
        workflow_id: str = "langgraph",
        agent_id: str = "langgraph",
    ) -> None:
        super().__init__(
            serde=serde, workflow_id=workflow_id, agent_id=agent_id, redact=store.sync.redactor
        )
        self.store = store
        self.loop: asyncio.AbstractEventLoop | None = None
        self._remember_loop()

    @classmethod
    @asynccontextmanager
    async def from_url(
        cls,
        url: str,
        *,
        serde: SerializerProtocol | None = None,
        workflow_id: str = "langgraph",
        agent_id: str = "langgraph",
    ) -> AsyncIterator[Self]:
        """A saver on ``actae.open_async(url)``, closed when the block ends."""
        async with open_async(url) as store:
            yield cls(store, serde=serde, workflow_id=workflow_id, agent_id=agent_id)

    async def athread_run(self, thread_id: str) -> RunInfo | None:
        """The Actae run that holds ``thread_id`` (``store.run`` of it), if it has one."""
        return await self._run(self._thread_run(thread_id))

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names, or the latest of its thread and namespace."""
        return await self._run(self._get_tuple(config))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Checkpoints newest first: of ``config``'s thread, or of every thread for ``None``."""
        self._remember_loop()
        async for item in aiterate(self.store, self._list(config, filter, before, limit)):
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store ``checkpoint`` (a transition on its thread's channel); the config naming it."""
        return await self._run(self._put(config, checkpoint, metadata))

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Record a task's pending writes for the checkpoint ``config`` names (idempotent)."""
        await self._run(self._put_writes(config, writes, task_id, task_path))

    async def adelete_thread(self, thread_id: str) -> None:
        """Make the thread read as empty: an audited tombstone (the log keeps its history)."""
        await self._run(self._delete_thread(thread_id))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Make the checkpoints of these LangGraph runs read as gone (reads the whole log)."""
        await self._run(self._delete_for_runs(run_ids))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy a thread, as an Actae fork with its receipt."""
        await self._run(self._copy_thread(source_thread_id, target_thread_id))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Keep each namespace's latest checkpoint visible (``keep_latest``), or none."""
        await self._run(self._prune(thread_ids, strategy))

    # -- blocking calls from other threads (a sync graph.invoke, get_state) -------------------

    def thread_run(self, thread_id: str) -> RunInfo | None:
        """:meth:`athread_run`, waited for from another thread."""
        return self._wait(self.athread_run(thread_id))

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """:meth:`aget_tuple`, waited for from another thread."""
        return self._wait(self.aget_tuple(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """:meth:`alist`, each item waited for from another thread."""
        items = self.alist(config, filter=filter, before=before, limit=limit)

        async def following() -> CheckpointTuple | None:
            return await anext(items, None)

        while (item := self._wait(following())) is not None:
            yield item

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """:meth:`aput`, waited for from another thread."""
        return self._wait(self.aput(config, checkpoint, metadata, new_versions))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """:meth:`aput_writes`, waited for from another thread."""
        self._wait(self.aput_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        """:meth:`adelete_thread`, waited for from another thread."""
        self._wait(self.adelete_thread(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """:meth:`adelete_for_runs`, waited for from another thread."""
        self._wait(self.adelete_for_runs(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """:meth:`acopy_thread`, waited for from another thread."""
        self._wait(self.acopy_thread(source_thread_id, target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """:meth:`aprune`, waited for from another thread."""
        self._wait(self.aprune(thread_ids, strategy=strategy))

    # -- plumbing ---------------------------------------------------------------------------

    async def _run(self, op: Op[T]) -> T:
        self._remember_loop()
        return await arun(self.store, op)

    def _remember_loop(self) -> None:
        """Note the event loop the coroutines run on, for the blocking methods to use."""
        if self.loop is None:
            # Made outside a loop, the saver learns it from its first coroutine call.
            with contextlib.suppress(RuntimeError):
                self.loop = asyncio.get_running_loop()

    def _wait(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """The result of ``coroutine``, run on the saver's loop while this thread waits."""
        loop = self.loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or running is loop:
            coroutine.close()
            raise asyncio.InvalidStateError(
                "AsyncActaeSaver's blocking methods wait for its event loop from another "
                "thread; on that loop use the coroutines (await saver.aget_tuple(...), "
                "graph.ainvoke(...)), or use ActaeSaver for blocking code"
            )
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result()
