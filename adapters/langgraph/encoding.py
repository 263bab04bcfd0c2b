"""How LangGraph's objects become Actae documents, and the names they are stored under.

Actae stores JSON, checked and checksummed. A checkpoint, its metadata and a pending write
hold LangGraph objects (messages, Pydantic models, bytes, ``Send``...) that only the saver's
``serde`` round-trips exactly, so each is stored *packed*: ``{"type": ..., "data":
<base64 of serde.dumps_typed>}``, the same bytes a PostgresSaver keeps in its ``bytea``
columns. Around them sit plain fields (thread, namespace, ids, source, step, run id) that
anyone reading the channel, or a read model, can use without LangGraph.

A thread's channel holds, besides Actae's own events:

========================  ============  =================================================
kind                      written as    what it means
========================  ============  =================================================
``langgraph.checkpoint``  transition    a checkpoint; the state *is* the checkpoint
``langgraph.writes``      record        one ``put_writes`` call: a task's pending writes
``langgraph.deleted``     transition    tombstone: everything before it reads as gone
``langgraph.pruned``      record        only the checkpoint it names stays visible
``langgraph.forgotten``   record        the checkpoints it names read as gone
``langgraph.copied``      record        another channel's history, as far as a cursor,
                                        reads as if written here (``copy_thread``)
========================  ============  =================================================

Operation ids are derived from what the call is about (thread, channel, checkpoint, task),
so that a retried call finds the original and replays it instead of writing again.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from langgraph.checkpoint.base import WRITES_IDX_MAP, CheckpointMetadata
from langgraph.checkpoint.serde.base import SerializerProtocol

CHECKPOINT = "langgraph.checkpoint"
WRITES = "langgraph.writes"
DELETED = "langgraph.deleted"
PRUNED = "langgraph.pruned"
FORGOTTEN = "langgraph.forgotten"
COPIED = "langgraph.copied"

THREAD_MARK = "thread"
NAMESPACE_MARK = "namespace"
CHECKPOINT_MARK = "checkpoint"
DELETED_MARK = "deleted"
"""Values of the ``"langgraph"`` key of a state: what the state is."""

MAX_THREAD_ID_LENGTH = 256
"""Thread ids go verbatim into operation ids (Actae allows 512 characters), so that a
thread's run can be found by its id and listed by it."""
_MAX_PART = 200
_MAX_OPERATION_ID = 500
_SUMMARY_KEYS = ("source", "step", "run_id")
_MAX_INT64 = 2**63 - 1

Packed = dict[str, str]
"""``{"type": ..., "data": <base64>}``: an object as ``serde.dumps_typed`` encodes it."""


def pack(serde: SerializerProtocol, value: object) -> Packed:
    """``value`` as a JSON object the saver's ``serde`` can turn back into it."""
    type_, data = serde.dumps_typed(value)
    return {"type": type_, "data": base64.b64encode(data).decode("ascii")}


def unpack(serde: SerializerProtocol, packed: Packed) -> Any:
    """The object :func:`pack` packed."""
    return serde.loads_typed((packed["type"], base64.b64decode(packed["data"])))


def thread_id_of(value: object) -> str:
    """A thread id as the saver stores it: text, short enough to name an operation."""
    thread_id = str(value)
    if not thread_id or len(thread_id) > MAX_THREAD_ID_LENGTH or "\x00" in thread_id:
        raise ValueError(
            f"thread_id must be 1 to {MAX_THREAD_ID_LENGTH} characters without NUL, got "
            f"{thread_id[:40]!r}{'...' if len(thread_id) > 40 else ''}: Actae finds a "
            "thread's run by an operation id that contains it"
        )
    return thread_id


# -- states ---------------------------------------------------------------------------------


def thread_state(thread_id: str) -> dict[str, Any]:
    """The first state of a thread's run, before any checkpoint: it names the thread."""
    return {"langgraph": THREAD_MARK, "thread_id": thread_id}


def namespace_state(thread_id: str, checkpoint_ns: str) -> dict[str, Any]:
    """The first state of a namespace's run (a subgraph's checkpoints): it names both."""
    return {"langgraph": NAMESPACE_MARK, "thread_id": thread_id, "checkpoint_ns": checkpoint_ns}


def checkpoint_state(
    checkpoint_id: str,
    checkpoint: Packed,
    metadata: Packed,
    parent_id: str | None,
    *,
    revised: bool = False,
    writes_from: int | None = None,
) -> dict[str, Any]:
    """The state version a checkpoint is: everything ``get_tuple`` returns, in one read.

    ``writes_from``: the first cursor where writes for it recorded before it may be.
    """
    state: dict[str, Any] = {
        "langgraph": CHECKPOINT_MARK,
        "checkpoint_id": checkpoint_id,
        "parent_checkpoint_id": parent_id,
        "checkpoint": checkpoint,
        "metadata": metadata,
    }
    if revised:
        state["revised"] = True
    if writes_from is not None:
        state["writes_from"] = writes_from
    return state


# -- payloads ---------------------------------------------------------------------------------


def checkpoint_payload(
    address: tuple[str, str],
    checkpoint_id: str,
    parent_id: str | None,
    metadata: CheckpointMetadata,
    packed: Packed,
    *,
    revised: bool = False,
    redacted: dict[str, int] | None = None,
) -> dict[str, Any]:
    """The event of a checkpoint: where it belongs, its parent, and its metadata.

    The packed metadata is exact; ``source``, ``step`` and ``run_id`` are repeated as plain
    JSON when they are plain, for readers of the log that do not run LangGraph.
    ``redacted`` counts what the store's redactor removed from the checkpoint and its
    metadata before they were packed (a transition has no ``redacted`` field of its own).
    """
    thread_id, checkpoint_ns = address
    payload: dict[str, Any] = {
        "thread_id": thread_id,
        "checkpoint_ns": checkpoint_ns,
        "checkpoint_id": checkpoint_id,
        "parent_checkpoint_id": parent_id,
        "metadata": packed,
    }
    for key in _SUMMARY_KEYS:
        value = metadata.get(key)
        if _plain(value):
            payload[key] = value
    if revised:
        payload["revised"] = True
    if redacted:
        payload["redacted"] = redacted
    return payload


def writes_payload(
    serde: SerializerProtocol,
    address: tuple[str, str],
    checkpoint_id: str,
    task: tuple[str, str],
    writes: list[tuple[int, str, object]],
) -> dict[str, Any]:
    """One ``put_writes`` call: ``(idx, channel, value)`` for the task ``(task_id, path)``."""
    thread_id, checkpoint_ns = address
    task_id, task_path = task
    return {
        "thread_id": thread_id,
        "checkpoint_ns": checkpoint_ns,
        "checkpoint_id": checkpoint_id,
        "task_id": task_id,
        "task_path": task_path,
        "writes": [
            {"idx": idx, "channel": channel, "value": pack(serde, value)}
            for idx, channel, value in writes
        ],
    }


def indexed_writes(writes: list[tuple[str, object]]) -> tuple[list[tuple[int, str, object]], bool]:
    """Each write with LangGraph's index (``WRITES_IDX_MAP``), and whether all are special.

    Special writes (errors, interrupts, scheduled, resume values) replace an earlier write
    of the same task and index, as every LangGraph saver upserts them; ordinary writes keep
    the first one stored.
    """
    indexed = [
        (WRITES_IDX_MAP.get(channel, idx), channel, value)
        for idx, (channel, value) in enumerate(writes)
    ]
    return indexed, all(channel in WRITES_IDX_MAP for channel, _ in writes)


def _plain(value: object) -> bool:
    if value is None:
        return False
    if isinstance(value, bool):
        return True
    if isinstance(value, int):
        return -_MAX_INT64 - 1 <= value <= _MAX_INT64
    return isinstance(value, str) and "\x00" not in value and len(value) <= _MAX_PART


# -- operation ids -----------------------------------------------------------------------------


def operation_id(workflow_id: str, what: str, *parts: str) -> str:
    """``workflow_id:what:part:part...``, or its digest when it would be too long to store.

    Parts are LangGraph's ids (threads, namespaces, checkpoints, tasks): usually short, but
    a nested subgraph's namespace can be long. The digest keeps the id deterministic.
    """
    text = ":".join((workflow_id, what, *parts))
    if len(text) <= _MAX_OPERATION_ID and "\x00" not in text and _encodable(text):
        return text
    return f"{workflow_id}:{what}:sha256:{digest(text)}"


def digest(value: object) -> str:
    """A short, stable digest of a JSON-able value (or text)."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: Actae refuses it
        return False
    return True
