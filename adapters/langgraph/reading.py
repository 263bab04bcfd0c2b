"""``get_tuple`` and ``list``: checkpoints back as LangGraph's ``CheckpointTuple``.

The latest checkpoint comes from the head, any other from the folded history (:mod:`.history`),
loading the state of only the checkpoints handed out.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple, get_checkpoint_id, writes_sort_key

from actae.adapters.langgraph.encoding import thread_id_of, unpack
from actae.adapters.langgraph.history import (
    FORKED,
    Entry,
    StoredWrite,
    at_head,
    events,
    history,
)
from actae.adapters.langgraph.threads import Context, Ref, find_namespace, find_thread, namespaces

Address = tuple[str, str]  # a thread id and a checkpoint namespace


def address_of(config: RunnableConfig) -> Address:
    """The thread and namespace a config names (the root namespace when it names none)."""
    configurable = config.get("configurable") or {}
    if "thread_id" not in configurable:
        raise ValueError("the config names no thread: pass configurable={'thread_id': ...}")
    return thread_id_of(configurable["thread_id"]), str(configurable.get("checkpoint_ns") or "")


def config_of(address: Address, checkpoint_id: str) -> RunnableConfig:
    """The config that names one checkpoint."""
    thread_id, checkpoint_ns = address
    ids = {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns, "checkpoint_id": checkpoint_id}
    return {"configurable": ids}


def tuple_of(
    ctx: Context, address: Address, state: dict[str, Any], writes: Iterable[StoredWrite]
) -> CheckpointTuple:
    """The tuple a checkpoint's state version and its writes make, writes in LangGraph's order."""
    parent = state.get("parent_checkpoint_id")
    ordered = sorted(writes, key=lambda w: writes_sort_key(w.task_path, w.task_id, w.idx))
    return CheckpointTuple(
        config=config_of(address, str(state["checkpoint_id"])),
        checkpoint=unpack(ctx.serde, state["checkpoint"]),
        metadata=unpack(ctx.serde, state["metadata"]),
        parent_config=config_of(address, str(parent)) if parent else None,
        pending_writes=[(w.task_id, w.channel, unpack(ctx.serde, w.value)) for w in ordered],
    )


def get_tuple(ctx: Context, config: RunnableConfig) -> CheckpointTuple | None:
    """The checkpoint ``config`` names, or its namespace's latest; ``None`` if there is none."""
    address = address_of(config)
    wanted = get_checkpoint_id(config)
    ref = find_namespace(ctx, *address)
    if ref is None:
        return None
    head = at_head(ctx.store, ref.channel_id)
    if head is not None and wanted in (None, head.checkpoint_id):
        return tuple_of(ctx, address, head.state, head.writes)
    visible = history(ctx.store, ref.channel_id)
    entry = visible.latest() if wanted is None else visible.entries.get(wanted)
    return None if entry is None else _loaded(ctx, address, entry)


@dataclass(frozen=True, slots=True)
class Query:
    """What ``list`` asks for besides the thread: namespace, checkpoint, before, metadata."""

    checkpoint_ns: str | None
    checkpoint_id: str | None
    before: str | None
    filter: dict[str, Any]

    def wants(self, ctx: Context, entry: Entry) -> bool:
        """Whether the visible checkpoint ``entry`` answers the query."""
        if self.checkpoint_id is not None and entry.checkpoint_id != self.checkpoint_id:
            return False
        if self.before is not None and not entry.checkpoint_id < self.before:
            return False
        if not self.filter:
            return True
        metadata = unpack(ctx.serde, entry.payload["metadata"])
        return all(metadata.get(key) == value for key, value in self.filter.items())


def list_checkpoints(
    ctx: Context,
    config: RunnableConfig | None,
    before: RunnableConfig | None,
    filter: dict[str, Any] | None,
    limit: int | None,
) -> Iterator[CheckpointTuple]:
    """The checkpoints a ``list`` call asks for, newest first, each state read as handed out."""
    namespace = ((config or {}).get("configurable") or {}).get("checkpoint_ns")
    query = Query(
        checkpoint_ns=None if namespace is None else str(namespace),
        checkpoint_id=get_checkpoint_id(config) if config else None,
        before=get_checkpoint_id(before) if before else None,
        filter=dict(filter or {}),
    )
    threads = _all_threads(ctx) if config is None else [address_of(config)[0]]
    found = (pair for thread_id in threads for pair in _candidates(ctx, thread_id, query))
    for address, entry in islice(found, None if limit is None else max(limit, 0)):
        yield _loaded(ctx, address, entry)


def _candidates(ctx: Context, thread_id: str, query: Query) -> list[tuple[Address, Entry]]:
    channels: list[tuple[str, Ref]]
    if query.checkpoint_ns is None:
        root = find_thread(ctx, thread_id)
        channels = [] if root is None else namespaces(ctx.store, root)
    else:
        ref = find_namespace(ctx, thread_id, query.checkpoint_ns)
        channels = [] if ref is None else [(query.checkpoint_ns, ref)]
    found: list[tuple[Address, Entry]] = []
    for checkpoint_ns, ref in channels:
        visible = history(ctx.store, ref.channel_id)
        found.extend(
            ((thread_id, checkpoint_ns), entry)
            for entry in reversed(visible.entries.values())
            if query.wants(ctx, entry)
        )
    if len(channels) > 1:
        found.sort(key=lambda pair: pair[1].checkpoint_id, reverse=True)
    return found


def _loaded(ctx: Context, address: Address, entry: Entry) -> CheckpointTuple:
    state = ctx.store.state_at(entry.channel_id, entry.cursor)
    return tuple_of(ctx, address, state.state, entry.writes.values())


def _all_threads(ctx: Context) -> list[str]:
    # Every thread id in the store: from the operation ids its runs were created under.
    found: dict[str, None] = {}
    for event in events(ctx.store, None):
        if event.cursor == 1 and event.kind in ("run.started", FORKED) and event.operation_id:
            thread_id = ctx.thread_of(event.operation_id)
            if thread_id is not None:
                found[thread_id] = None
    return list(found)
