"""How LangGraph's objects become Actae documents, and the names they are stored under.

Each object is stored *packed* (base64 of ``serde.dumps_typed``: only the saver's serde
round-trips it) beside plain fields (docs/langgraph.md). Operation ids derive from what a
call is about, so a retried call replays.
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
PRUNED = "langgraph.pruned"
FORGOTTEN = "langgraph.forgotten"
COPIED = "langgraph.copied"

THREAD_MARK = "thread"
NAMESPACE_MARK = "namespace"
CHECKPOINT_MARK = "checkpoint"
"""Values of the ``"langgraph"`` key of a state: what the state is."""

MAX_THREAD_ID_LENGTH = 256
"""Thread ids go verbatim into operation ids (512 at most), to find a thread's run by it."""
_MAX_PART = 200
_MAX_OPERATION_ID = 500
_SUMMARY_KEYS = ("source", "step", "run_id")
_STATE_KEYS = ("checkpoint_id", "parent_checkpoint_id", "checkpoint", "metadata", "revised")
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


def checkpoint_state(
    payload: dict[str, Any], checkpoint: Packed, writes_from: int | None
) -> dict[str, Any]:
    """The state version a checkpoint is: all ``get_tuple`` returns, in one read."""
    source = {**payload, "checkpoint": checkpoint}
    state: dict[str, Any] = {"langgraph": CHECKPOINT_MARK}
    state.update((key, source[key]) for key in _STATE_KEYS if key in source)
    if writes_from is not None:
        state["writes_from"] = writes_from
    return state


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
    """The event of a checkpoint: where it belongs, its parent, its metadata (plain keys too)."""
    thread_id, checkpoint_ns = address
    payload: dict[str, Any] = {
        "thread_id": thread_id,
        "checkpoint_ns": checkpoint_ns,
        "checkpoint_id": checkpoint_id,
        "parent_checkpoint_id": parent_id,
        "metadata": packed,
    }
    for key in _SUMMARY_KEYS:
        if _plain(value := metadata.get(key)):
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
    return {
        "thread_id": address[0],
        "checkpoint_ns": address[1],
        "checkpoint_id": checkpoint_id,
        "task_id": task[0],
        "task_path": task[1],
        "writes": [
            {"idx": idx, "channel": channel, "value": pack(serde, value)}
            for idx, channel, value in writes
        ],
    }


def indexed_writes(writes: list[tuple[str, object]]) -> tuple[list[tuple[int, str, object]], bool]:
    """Each write with LangGraph's index (``WRITES_IDX_MAP``), and whether all are special."""
    indexed = [
        (WRITES_IDX_MAP.get(channel, idx), channel, value)
        for idx, (channel, value) in enumerate(writes)
    ]
    return indexed, all(channel in WRITES_IDX_MAP for channel, _ in writes)


def _plain(value: object) -> bool:
    if isinstance(value, bool):
        return True
    if isinstance(value, int):
        return -_MAX_INT64 - 1 <= value <= _MAX_INT64
    return isinstance(value, str) and "\x00" not in value and len(value) <= _MAX_PART


def operation_id(workflow_id: str, what: str, *parts: str) -> str:
    """``workflow_id:what:part:part...``, or its digest when too long or holding NUL, surrogates."""
    text = ":".join((workflow_id, what, *parts))
    if len(text) <= _MAX_OPERATION_ID and not any(
        c == "\x00" or "\ud800" <= c <= "\udfff" for c in text
    ):
        return text
    return f"{workflow_id}:{what}:sha256:{digest(text)}"


def digest(value: object) -> str:
    """A short, stable digest of a JSON-able value (or text)."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]
