"""``delete_thread``, ``prune`` and ``delete_for_runs``: through the store's own custody.

Deleting ends every run of the thread: forgotten at once when the store encrypts, else
completed, for retention to purge (docs/data.md). ``keep_latest`` and ``delete_for_runs``
hide checkpoints inside a thread that goes on, with a record reads honour (:mod:`.history`).
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from actae.adapters.langgraph.encoding import (
    CHECKPOINT,
    COPIED,
    FORGOTTEN,
    PRUNED,
    unpack,
)
from actae.adapters.langgraph.history import FORKED, at_head, events, history
from actae.adapters.langgraph.threads import (
    Context,
    Ref,
    find_thread,
    forget_remembered,
    namespaces,
)
from actae.adapters.langgraph.writing import mark
from actae.domain.errors import IllegalTransitionError, ValidationError

STRATEGIES = ("keep_latest", "delete")


def delete_thread(ctx: Context, thread_id: str, reason: str = "delete_thread") -> None:
    """End every run of ``thread_id``: forgotten (crypto-shredded) or completed for retention."""
    root = find_thread(ctx, thread_id)
    if root is None:
        return
    found = namespaces(ctx.store, root)
    for checkpoint_ns, ref in [*found[1:], found[0]]:  # the root last: it hears its children
        why = f"LangGraph {reason}: thread {thread_id!r}" + (
            f", namespace {checkpoint_ns!r}" if checkpoint_ns else ""
        )
        try:
            ctx.store.forget(ref.run_id, actor=ctx.workflow_id, reason=why)
        except ValidationError:  # written in clear: retention deletes it
            with contextlib.suppress(IllegalTransitionError):  # ended already
                ctx.store.complete_run(ref.run_id, {"deleted": why})
        forget_remembered(ctx, ref)


def prune(ctx: Context, thread_ids: Sequence[str], strategy: str) -> None:
    """Keep only each namespace's latest checkpoint (``keep_latest``), or none (``delete``)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown prune strategy {strategy!r}: expected one of {STRATEGIES}")
    for thread_id in thread_ids:
        if strategy == "delete":
            delete_thread(ctx, thread_id, reason="prune delete")
            continue
        root = find_thread(ctx, thread_id)
        for checkpoint_ns, ref in [] if root is None else namespaces(ctx.store, root):
            _keep_latest(ctx, (thread_id, checkpoint_ns), ref)


def delete_for_runs(ctx: Context, run_ids: Sequence[str]) -> None:
    """Forget the checkpoints of the LangGraph runs ``run_ids`` in every thread (reads the log)."""
    wanted = {str(run_id) for run_id in run_ids}
    if not wanted:
        return
    hits: dict[UUID, set[str]] = defaultdict(set)
    readers: dict[UUID, set[UUID]] = defaultdict(set)  # channel -> channels that copy it

    for event in events(ctx.store, None):
        payload = event.payload
        if payload is None:
            continue  # a forgotten run's (or one this store cannot open): no checkpoint to find
        if event.kind == CHECKPOINT and _run_of(ctx, payload) in wanted:
            hits[event.channel_id].add(str(payload["checkpoint_id"]))
        elif event.kind == COPIED:
            readers[UUID(str(payload["channel_id"]))].add(event.channel_id)
        elif event.kind == FORKED and event.cursor == 1 and "parent_channel_id" in payload:
            readers[UUID(str(payload["parent_channel_id"]))].add(event.channel_id)
    for channel_id, checkpoint_ids in _spread(hits, readers).items():
        payload = {
            "checkpoint_ids": sorted(checkpoint_ids),
            "run_ids": sorted(wanted),
            "reason": "delete_for_runs",
        }
        mark(ctx, channel_id, FORGOTTEN, payload)


def _run_of(ctx: Context, payload: dict[str, Any]) -> str | None:
    if "run_id" in payload:
        return str(payload["run_id"])
    run_id = unpack(ctx.serde, payload["metadata"]).get("run_id")
    return None if run_id is None else str(run_id)


def _spread(hits: dict[UUID, set[str]], readers: dict[UUID, set[UUID]]) -> dict[UUID, set[str]]:
    spread: dict[UUID, set[str]] = defaultdict(set)
    for channel_id, checkpoint_ids in hits.items():
        queue, seen = [channel_id], {channel_id}
        while queue:
            current = queue.pop()
            spread[current] |= checkpoint_ids
            for reader in readers.get(current, set()) - seen:
                seen.add(reader)
                queue.append(reader)
    return spread


def _keep_latest(ctx: Context, address: tuple[str, str], ref: Ref) -> None:
    thread_id, checkpoint_ns = address

    def payload() -> dict[str, Any] | None:
        latest = at_head(ctx.store, ref.channel_id) or history(ctx.store, ref.channel_id).latest()
        if latest is None:
            return None  # nothing visible: nothing to prune
        keep = latest.checkpoint_id
        return {
            "thread_id": thread_id,
            "checkpoint_ns": checkpoint_ns,
            "keep": keep,
            "reason": "prune keep_latest",
        }

    mark(ctx, ref.channel_id, PRUNED, payload)
