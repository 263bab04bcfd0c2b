"""``put`` and ``put_writes``: a checkpoint is a transition, a task's writes a record.

Each write names the head it read and an operation id derived from what it is, so a retry
replays. A call that lost to records only tries again after them; a ``put`` that lost to
another checkpoint lets the ``ConflictError`` reach LangGraph. A checkpoint's writes can
land before it (LangGraph saves in the background): the process notes the head such an
*early* write follows, and the checkpoint's state says where its writes start.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
from actae.domain.errors import ConflictError, OperationConflictError
from actae.domain.redaction import merge_counts
from actae.domain.values import Receipt

MAX_ATTEMPTS = 1000  # while other writers land first (N tasks together: N - 1 for the last)
Append = Callable[[Receipt, str, bool], Receipt]  # one attempt: head, operation id, revised


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

    def append(head: Receipt, operation: str, revised: bool) -> Receipt:
        payload = checkpoint_payload(
            address, checkpoint_id, parent, stored, packed_metadata, revised=revised, redacted=found
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
            operation_id=operation,
        )

    # The id may hold a different checkpoint, still visible: LangGraph's savers overwrite
    # it, so this one is stored after it as a revision, and reads as the checkpoint.
    revision = f":revised:{digest([packed, packed_metadata])}"
    _appended(ctx, key, _put_operation(ctx, *key), append, revision=revision)
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

    def append(head: Receipt, operation: str, _: bool) -> Receipt:
        return ctx.store.record(
            ref.channel_id,
            kind=WRITES,
            payload=payload,
            expected_cursor=head.cursor,
            operation_id=operation,
            redact=reporting(found),
        )

    # Ordinary writes keep the first stored under a task and index; special ones (errors,
    # interrupts) replace it, so their content is part of their id.
    parts = [str(ref.channel_id), checkpoint_id, task[0], ",".join(str(i) for i, _, _ in indexed)]
    if special:
        parts.append(digest(payload["writes"]))
    base = operation_id(ctx.workflow_id, "writes", *parts)
    key = (ref.channel_id, checkpoint_id)
    _appended(ctx, key, base, append, head=_noted_if_early(ctx, key))


def _redacted_checkpoint(
    ctx: Context, checkpoint: Checkpoint, metadata: CheckpointMetadata
) -> tuple[Checkpoint, CheckpointMetadata, Found]:
    if ctx.redact is None:
        return checkpoint, metadata, {}
    checkpoint, in_values = redacted_channel_values(checkpoint, ctx.redact)
    cleaned, in_metadata = redacted_value(metadata, ctx.redact, "langgraph.checkpoint.metadata")
    return checkpoint, cast(CheckpointMetadata, cleaned), merge_counts(in_values, in_metadata)


def _redacted_writes(
    ctx: Context, writes: list[tuple[int, str, object]]
) -> tuple[list[tuple[int, str, object]], Found]:
    if ctx.redact is None:
        return writes, {}
    cleaned: list[tuple[int, str, object]] = []
    found: list[Found] = []
    for idx, channel, value in writes:
        kept, counts = redacted_value(value, ctx.redact, f"langgraph.writes.{channel}")
        cleaned.append((idx, channel, kept))
        found.append(counts)
    return cleaned, merge_counts(*found)


def _noted_if_early(ctx: Context, key: tuple[UUID, str]) -> Receipt | None:
    # Note a write for a checkpoint not stored yet, and return the head it follows.
    if key in ctx.stored:
        return None
    if ctx.store.operation(_put_operation(ctx, *key)) is not None:
        remember(ctx.stored, key, None)
        return None
    head = ctx.store.head(key[0])
    remember(ctx.early, key, min(ctx.early.get(key, head.cursor + 1), head.cursor + 1))
    return head


def _put_operation(ctx: Context, channel_id: UUID, checkpoint_id: str) -> str:
    return operation_id(ctx.workflow_id, "checkpoint", str(channel_id), checkpoint_id)


def _appended(
    ctx: Context,
    key: tuple[UUID, str],
    base: str,
    append: Append,
    *,
    revision: str | None = None,
    head: Receipt | None = None,
) -> None:
    # Append after the head (just read, if given), retrying as the module says. revision: a
    # put's suffix when its id holds other, still visible content (else the earlier stands).
    channel_id, checkpoint_id = key
    operation, revised = base, False
    conflict: ConflictError | None = None
    for _ in range(MAX_ATTEMPTS):
        head = head or ctx.store.head(channel_id)
        try:
            receipt = append(head, operation, revised)
        except ConflictError as error:
            if revision is not None and error.actual_version != head.state_version:
                raise  # another checkpoint came first: a second writer
            conflict, head = error, head_of(error, channel_id)
            continue
        except OperationConflictError:
            earlier = ctx.store.operation(operation)
            cursor, refused = int(earlier.result["cursor"]) if earlier is not None else 0, True
        else:
            if not receipt.replayed:
                return
            cursor, refused = receipt.cursor, False
        head = None
        hidden = hidden_since(ctx.store, channel_id, checkpoint_id, cursor)
        if hidden is not None:
            operation, revised = f"{base}@{hidden}", False
        elif not refused or revision is None:
            return
        else:
            operation, revised = f"{operation}{revision}", True
    if conflict is not None:
        raise conflict
    raise RuntimeError(f"channel {channel_id}: gave up on {base!r} after {MAX_ATTEMPTS} attempts")


def mark(
    ctx: Context,
    channel_id: UUID,
    kind: str,
    payload: dict[str, Any] | Callable[[], dict[str, Any] | None],
    operation: str | None = None,
) -> None:
    """Record the marker ``kind`` (a prune, forget or copy) after the head, again if it moved.

    ``payload`` may be decided anew for each head (``None``: nothing to record).
    """
    conflict: ConflictError | None = None
    head: Receipt | None = None
    for _ in range(MAX_ATTEMPTS):
        head = head or ctx.store.head(channel_id)
        body = payload() if callable(payload) else payload
        if body is None:
            return
        what = kind.removeprefix("langgraph.")
        named = operation or operation_id(ctx.workflow_id, what, str(channel_id), str(head.cursor))
        try:
            ctx.store.record(
                channel_id, kind=kind, payload=body, expected_cursor=head.cursor, operation_id=named
            )
        except ConflictError as error:
            conflict, head = error, head_of(error, channel_id)
            continue
        return
    if conflict is not None:
        raise conflict


def head_of(conflict: ConflictError, channel_id: UUID) -> Receipt:
    """The head a refused write lost to, as the refusal reports it: no need to read it."""
    return Receipt(
        channel_id=channel_id,
        cursor=conflict.actual_cursor,
        state_version=conflict.actual_version,
        operation_id=None,
    )
