"""``put`` and ``put_writes``: a checkpoint is a transition, a task's writes a record.

Each write names the head it read and an operation id derived from what it is, so a retry
replays. When the head moved first, a call that lost to records only (writes commute, a
checkpoint still follows its parent) tries again after it; a ``put`` that lost to another
checkpoint lets the ``ConflictError`` reach LangGraph, as Actae refuses a stale writer. A
replay that a prune or forget hid since writes again.

LangGraph saves in the background, so a checkpoint's writes can land before it. Only the
process that made the checkpoint knows its id, so it notes the head such an *early* write
follows, and the checkpoint's state says where its writes start (``writes_from``): the head
still answers ``get_tuple`` in one read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast
from uuid import UUID

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    Checkpoint,
    CheckpointMetadata,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
)

from actae.adapters.langgraph.encoding import (
    CHECKPOINT,
    WRITES,
    checkpoint_payload,
    checkpoint_state,
    digest,
    indexed_writes,
    operation_id,
    pack,
    writes_payload,
)
from actae.adapters.langgraph.history import hidden_since
from actae.adapters.langgraph.reading import address_of, config_of
from actae.adapters.langgraph.redacting import (
    Found,
    redacted_channel_values,
    redacted_value,
    reporting,
)
from actae.adapters.langgraph.threads import Context, ensure_namespace, remember
from actae.adapters.runtime.store import Store
from actae.domain.errors import ConflictError, OperationConflictError
from actae.domain.redaction import merge_counts
from actae.domain.values import Receipt

MAX_ATTEMPTS = 1000
"""Attempts while other writers land first (N tasks finishing together: N - 1 for the last)."""


@dataclass(slots=True)
class Attempt:
    """The operation id the next attempt writes under; ``revised`` for a changed checkpoint."""

    operation: str
    revised: bool = False


Append = Callable[[Receipt, Attempt], Receipt]
"""Writes one attempt after the head it is given."""


def agent_of(ctx: Context, config: RunnableConfig) -> str:
    """The agent a new thread's run is started for: ``agent_id`` in the config, or the saver's."""
    for source in (config.get("metadata"), config.get("configurable")):
        agent = (source or {}).get("agent_id")
        if isinstance(agent, str) and agent:
            return agent
    return ctx.agent_id


def put(
    ctx: Context, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata
) -> RunnableConfig:
    """Store ``checkpoint`` after its namespace's head; the config that names it."""
    address = address_of(config)
    checkpoint_id = checkpoint["id"]
    parent = get_checkpoint_id(config)
    stored = get_serializable_checkpoint_metadata(config, metadata)
    checkpoint, stored, found = _redacted_checkpoint(ctx, checkpoint, stored)
    packed_metadata = pack(ctx.serde, stored)
    packed = pack(ctx.serde, checkpoint)
    ref = ensure_namespace(ctx, *address, agent_of(ctx, config))

    key = (ref.channel_id, checkpoint_id)

    def append(head: Receipt, attempt: Attempt) -> Receipt:
        payload = checkpoint_payload(
            address,
            checkpoint_id,
            parent,
            stored,
            packed_metadata,
            revised=attempt.revised,
            redacted=found,
        )
        # Read after the head: an early write noted itself before it landed, so one that
        # is already in the head is here, and one that lands later refuses this attempt.
        writes_from = ctx.early.get(key)
        return ctx.store.transition(
            ref.channel_id,
            kind=CHECKPOINT,
            payload=payload,
            state=checkpoint_state(payload, packed, writes_from),
            expected_version=head.state_version,
            expected_cursor=head.cursor,
            operation_id=attempt.operation,
        )

    def revise(attempt: Attempt) -> bool:
        # The id holds a different checkpoint, still visible: LangGraph's savers overwrite
        # it, so this one is stored after it as a revision, and reads as the checkpoint.
        attempt.operation = f"{attempt.operation}:revised:{digest([packed, packed_metadata])}"
        attempt.revised = True
        return True

    base = _put_operation(ctx, ref.channel_id, checkpoint_id)
    _appended(ctx.store, (ref.channel_id, checkpoint_id), base, append, revise, guard=True)
    remember(ctx.stored, key, None)
    return config_of(address, checkpoint_id)


def put_writes(
    ctx: Context, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task: tuple[str, str]
) -> None:
    """Record the pending writes of one task (``(task_id, task_path)``) for a checkpoint."""
    if not writes:
        return
    address = address_of(config)
    checkpoint_id = get_checkpoint_id(config)
    if checkpoint_id is None:
        raise ValueError("put_writes needs the config of a checkpoint (checkpoint_id)")
    indexed, special = indexed_writes(list(writes))
    indexed, found = _redacted_writes(ctx, indexed)
    payload = writes_payload(ctx.serde, address, checkpoint_id, task, indexed)
    ref = ensure_namespace(ctx, *address, agent_of(ctx, config))

    def append(head: Receipt, attempt: Attempt) -> Receipt:
        return ctx.store.record(
            ref.channel_id,
            kind=WRITES,
            payload=payload,
            expected_cursor=head.cursor,
            operation_id=attempt.operation,
            redact=reporting(found),
        )

    # Ordinary writes keep the first stored under a task and index; special ones (errors,
    # interrupts) replace it, so their content is part of their id.
    parts = [str(ref.channel_id), checkpoint_id, task[0], ",".join(str(i) for i, _, _ in indexed)]
    if special:
        parts.append(digest(payload["writes"]))
    base = operation_id(ctx.workflow_id, "writes", *parts)
    head = _noted_if_early(ctx, ref.channel_id, checkpoint_id)
    target = (ref.channel_id, checkpoint_id)
    _appended(ctx.store, target, base, append, lambda _: False, guard=False, head=head)


def _redacted_checkpoint(
    ctx: Context, checkpoint: Checkpoint, metadata: CheckpointMetadata
) -> tuple[Checkpoint, CheckpointMetadata, Found]:
    """The checkpoint and its metadata as they may be stored, and what redaction removed."""
    if ctx.redact is None:
        return checkpoint, metadata, {}
    checkpoint, in_values = redacted_channel_values(checkpoint, ctx.redact)
    cleaned, in_metadata = redacted_value(metadata, ctx.redact, "langgraph.checkpoint.metadata")
    return checkpoint, cast(CheckpointMetadata, cleaned), merge_counts(in_values, in_metadata)


def _redacted_writes(
    ctx: Context, writes: list[tuple[int, str, object]]
) -> tuple[list[tuple[int, str, object]], Found]:
    """A task's writes as they may be stored, and what redaction removed."""
    if ctx.redact is None:
        return writes, {}
    cleaned: list[tuple[int, str, object]] = []
    found: list[Found] = []
    for idx, channel, value in writes:
        kept, counts = redacted_value(value, ctx.redact, f"langgraph.writes.{channel}")
        cleaned.append((idx, channel, kept))
        found.append(counts)
    return cleaned, merge_counts(*found)


def _noted_if_early(ctx: Context, channel_id: UUID, checkpoint_id: str) -> Receipt | None:
    """Note a write for a checkpoint not stored yet, and return the head it follows."""
    key = (channel_id, checkpoint_id)
    if key in ctx.stored:
        return None
    if ctx.store.operation(_put_operation(ctx, channel_id, checkpoint_id)) is not None:
        remember(ctx.stored, key, None)
        return None
    head = ctx.store.head(channel_id)
    remember(ctx.early, key, min(ctx.early.get(key, head.cursor + 1), head.cursor + 1))
    return head


def _put_operation(ctx: Context, channel_id: UUID, checkpoint_id: str) -> str:
    return operation_id(ctx.workflow_id, "checkpoint", str(channel_id), checkpoint_id)


def _appended(
    store: Store,
    target: tuple[UUID, str],
    base: str,
    append: Append,
    revise: Callable[[Attempt], bool],
    *,
    guard: bool,
    head: Receipt | None = None,
) -> None:
    """Append after the head, retrying as the module says; ``guard``: refuse a new version.

    ``revise`` is asked when the id holds other, still visible content: it changes the
    attempt and says to go on, or that the earlier write stands. ``head``: just read.
    """
    channel_id, checkpoint_id = target
    attempt = Attempt(base)
    conflict: ConflictError | None = None
    known = head
    for _ in range(MAX_ATTEMPTS):
        head = known or store.head(channel_id)
        known = None
        try:
            receipt = append(head, attempt)
        except ConflictError as error:
            if guard and error.actual_version != head.state_version:
                raise  # another checkpoint came first: a second writer
            conflict, known = error, head_of(error, channel_id)
            continue
        except OperationConflictError:
            earlier = store.operation(attempt.operation)
            cursor = int(earlier.result["cursor"]) if earlier is not None else 0
            hidden = hidden_since(store, channel_id, checkpoint_id, cursor)
            if hidden is not None:
                attempt = Attempt(f"{base}@{hidden}")
                continue
            if not revise(attempt):
                return
            continue
        if not receipt.replayed:
            return
        hidden = hidden_since(store, channel_id, checkpoint_id, receipt.cursor)
        if hidden is None:
            return
        attempt = Attempt(f"{base}@{hidden}")
    if conflict is not None:
        raise conflict
    raise RuntimeError(f"channel {channel_id}: gave up on {base!r} after {MAX_ATTEMPTS} attempts")


def after_head(store: Store, channel_id: UUID, write: Callable[[Receipt], object]) -> None:
    """Run ``write`` after the head, again after each new head another writer made first.

    For the writes (prunes, forgets, copies) that decide anew from each head they are given.
    """
    conflict: ConflictError | None = None
    known: Receipt | None = None
    for _ in range(MAX_ATTEMPTS):
        head = known or store.head(channel_id)
        try:
            write(head)
        except ConflictError as error:
            conflict, known = error, head_of(error, channel_id)
            continue
        return
    if conflict is not None:
        raise conflict


def marker(
    ctx: Context,
    channel_id: UUID,
    kind: str,
    payload: dict[str, Any],
    head: Receipt,
    operation: str | None = None,
) -> Receipt:
    """Record the marker ``kind`` right after ``head``, under ``operation`` or an id naming both."""
    if operation is None:
        what = kind.removeprefix("langgraph.")
        operation = operation_id(ctx.workflow_id, what, str(channel_id), str(head.cursor))
    return ctx.store.record(
        channel_id, kind=kind, payload=payload, expected_cursor=head.cursor, operation_id=operation
    )


def head_of(conflict: ConflictError, channel_id: UUID) -> Receipt:
    """The head a refused write lost to, as the refusal reports it: no need to read it."""
    return Receipt(
        channel_id=channel_id,
        cursor=conflict.actual_cursor,
        state_version=conflict.actual_version,
        operation_id=None,
    )
