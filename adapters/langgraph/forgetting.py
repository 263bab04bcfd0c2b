"""``delete_thread``, ``prune`` and ``delete_for_runs``: audited tombstones, not row deletion.

Actae's log is append-only: nothing in it is ever deleted (a retention feature that really
forgets is to come). So each of these calls appends an event that says what is gone and
why, and every read of this saver honours it (:mod:`~actae.adapters.langgraph.history`):

* ``delete_thread`` (and ``prune(..., strategy="delete")``) puts a tombstone transition on
  each namespace of the thread: the thread reads as empty, and a later ``put`` starts it
  afresh on the same run;
* ``prune(..., strategy="keep_latest")`` records, per namespace, the one checkpoint that
  stays visible, with its writes;
* ``delete_for_runs`` records, on every channel holding one (a copy's included), which
  checkpoints of those LangGraph runs read as gone.

The checkpoints themselves stay in the log: ``store.events``, ``store.state_at`` and forks
still reach them, and the tombstones say who hid what and when. Each tombstone names the
head it read and retries on a lost race: a deletion applies to what is there when it lands.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from functools import partial
from typing import Any
from uuid import UUID

from actae.adapters.langgraph.calls import Op, ask
from actae.adapters.langgraph.encoding import (
    CHECKPOINT,
    COPIED,
    DELETED,
    FORGOTTEN,
    PRUNED,
    deleted_state,
    operation_id,
    unpack,
)
from actae.adapters.langgraph.history import FORKED, at_head, history, scan_store
from actae.adapters.langgraph.threads import Context, Ref, find_thread, namespaces
from actae.adapters.langgraph.writing import after_head
from actae.adapters.runtime.store import Store
from actae.domain.values import ChannelEvent, Receipt

STRATEGIES = ("keep_latest", "delete")


def delete_thread(ctx: Context, thread_id: str, reason: str = "delete_thread") -> Op[None]:
    """Tombstone every namespace of ``thread_id``; nothing happens for an unknown thread."""
    root = yield from find_thread(ctx, thread_id)
    if root is None:
        return
    for checkpoint_ns, ref in (yield from namespaces(root)):
        yield from _tombstone(ctx, (thread_id, checkpoint_ns), ref, reason)


def prune(ctx: Context, thread_ids: Sequence[str], strategy: str) -> Op[None]:
    """Keep only each namespace's latest checkpoint (``keep_latest``), or none (``delete``)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown prune strategy {strategy!r}: expected one of {STRATEGIES}")
    for thread_id in thread_ids:
        if strategy == "delete":
            yield from delete_thread(ctx, thread_id, reason="prune delete")
            continue
        root = yield from find_thread(ctx, thread_id)
        for checkpoint_ns, ref in [] if root is None else (yield from namespaces(root)):
            yield from _keep_latest(ctx, (thread_id, checkpoint_ns), ref)


def delete_for_runs(ctx: Context, run_ids: Sequence[str]) -> Op[None]:
    """Forget the checkpoints of the LangGraph runs ``run_ids``, in every thread.

    LangGraph names runs, not threads, so this reads the store's whole log once: the
    checkpoints whose metadata names one of the runs, and which channels copied which.
    """
    wanted = {str(run_id) for run_id in run_ids}
    if not wanted:
        return
    hits: dict[UUID, set[str]] = defaultdict(set)
    readers: dict[UUID, set[UUID]] = defaultdict(set)  # channel -> channels that copy it

    def visit(event: ChannelEvent) -> None:
        if event.payload is None:
            return  # a forgotten run's (or one this store cannot open): no checkpoint to find
        payload = event.payload
        if event.kind == CHECKPOINT and _run_of(ctx, payload) in wanted:
            hits[event.channel_id].add(str(payload["checkpoint_id"]))
        elif event.kind == COPIED:
            readers[UUID(str(payload["channel_id"]))].add(event.channel_id)
        elif event.kind == FORKED and event.cursor == 1 and "parent_channel_id" in payload:
            readers[UUID(str(payload["parent_channel_id"]))].add(event.channel_id)

    yield from scan_store(visit)
    for channel_id, checkpoint_ids in _spread(hits, readers).items():
        payload = {
            "checkpoint_ids": sorted(checkpoint_ids),
            "run_ids": sorted(wanted),
            "reason": "delete_for_runs",
        }
        yield from after_head(channel_id, partial(_recorded, ctx, channel_id, FORGOTTEN, payload))


def _run_of(ctx: Context, payload: dict[str, Any]) -> str | None:
    """The LangGraph run that put a checkpoint, from its event (plain, or else packed)."""
    if "run_id" in payload:
        return str(payload["run_id"])
    run_id = unpack(ctx.serde, payload["metadata"]).get("run_id")
    return None if run_id is None else str(run_id)


def _spread(hits: dict[UUID, set[str]], readers: dict[UUID, set[UUID]]) -> dict[UUID, set[str]]:
    """The checkpoints to forget per channel: where they were put and wherever copied to."""
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


def _tombstone(ctx: Context, address: tuple[str, str], ref: Ref, reason: str) -> Op[None]:
    """Put a tombstone on the channel, unless nothing is there to hide."""
    thread_id, checkpoint_ns = address

    def write(head: Receipt) -> Op[None]:
        (last,) = yield from ask(Store.events, ref.channel_id, head.cursor - 1, 1)
        if last.kind in (DELETED, "run.started"):
            return  # deleted already, or a new run that never held a checkpoint
        yield from ask(
            Store.transition,
            ref.channel_id,
            kind=DELETED,
            payload={"thread_id": thread_id, "checkpoint_ns": checkpoint_ns, "reason": reason},
            state=deleted_state(thread_id, checkpoint_ns),
            expected_version=head.state_version,
            expected_cursor=head.cursor,
            operation_id=_marker_id(ctx, DELETED, ref.channel_id, head),
        )

    yield from after_head(ref.channel_id, write)


def _keep_latest(ctx: Context, address: tuple[str, str], ref: Ref) -> Op[None]:
    """Record that only the namespace's latest checkpoint (as of the record) stays visible."""
    thread_id, checkpoint_ns = address

    def write(head: Receipt) -> Op[None]:
        latest = yield from at_head(ref.channel_id)
        kept = None if latest is None else latest.checkpoint_id
        if latest is None:
            entry = (yield from history(ref.channel_id)).latest()
            kept = None if entry is None else entry.checkpoint_id
        if kept is None:
            return  # nothing visible: nothing to prune
        payload = {
            "thread_id": thread_id,
            "checkpoint_ns": checkpoint_ns,
            "keep": kept,
            "reason": "prune keep_latest",
        }
        yield from _recorded(ctx, ref.channel_id, PRUNED, payload, head)

    yield from after_head(ref.channel_id, write)


def _recorded(
    ctx: Context, channel_id: UUID, kind: str, payload: dict[str, Any], head: Receipt
) -> Op[Receipt]:
    """Record the marker ``kind`` right after ``head``."""
    return (
        yield from ask(
            Store.record,
            channel_id,
            kind=kind,
            payload=payload,
            expected_cursor=head.cursor,
            operation_id=_marker_id(ctx, kind, channel_id, head),
        )
    )


def _marker_id(ctx: Context, kind: str, channel_id: UUID, head: Receipt) -> str:
    """A marker's operation id: its kind, its channel and the head it follows."""
    return operation_id(
        ctx.workflow_id, kind.removeprefix("langgraph."), str(channel_id), str(head.cursor)
    )
