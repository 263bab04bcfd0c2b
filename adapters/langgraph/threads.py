"""Which Actae run holds a LangGraph thread, and which holds each of its namespaces.

A thread is the run started under the operation id ``langgraph:thread:<thread_id>`` (an
idempotent start: no table of its own); any other namespace a child run with its own
channel. A deleted thread's runs end, and a later checkpoint starts the next generation
(``…#2``): the thread's run is the first generation whose run has not ended.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar
from uuid import UUID

from langgraph.checkpoint.serde.base import SerializerProtocol

from actae.adapters.langgraph.encoding import NAMESPACE_MARK, THREAD_MARK, operation_id
from actae.adapters.runtime.store import Store
from actae.domain.errors import OperationConflictError
from actae.domain.redaction import Redactor

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")

_RUN_OF_COMMAND = {"start_run": "run_id", "fork": "child_run_id"}  # the result's run id
REMEMBERED = 10_000  # entries each memory of Context keeps, oldest forgotten first

_remembering = threading.Lock()


@dataclass(frozen=True, slots=True)
class Ref:
    """A run that holds checkpoints, and its main channel."""

    run_id: UUID
    channel_id: UUID


@dataclass(slots=True)
class Context:
    """What every operation needs: the store, names, the serializer, known runs."""

    store: Store
    serde: SerializerProtocol
    workflow_id: str
    agent_id: str
    redact: Redactor | None = None
    runs: dict[str, Ref] = field(default_factory=dict)  # by the operation id that started them
    stored: dict[tuple[UUID, str], None] = field(default_factory=dict)  # checkpoints known
    early: dict[tuple[UUID, str], int] = field(default_factory=dict)  # first early write's cursor

    def thread_operation(self, thread_id: str) -> str:
        """The operation id that starts (and so names) the run of ``thread_id``."""
        return operation_id(self.workflow_id, "thread", thread_id)

    def thread_of(self, operation: str) -> str | None:
        """The thread id in a thread's operation id; ``None`` for any other id."""
        prefix = f"{self.workflow_id}:thread:"
        return operation.removeprefix(prefix) if operation.startswith(prefix) else None


def remember(memory: dict[K, T], key: K, value: T) -> None:
    """Keep ``key`` (as the newest) in a bounded memory; savers share it between threads."""
    with _remembering:
        memory.pop(key, None)
        memory[key] = value
        while len(memory) > REMEMBERED:
            memory.pop(next(iter(memory)), None)


def forget_remembered(ctx: Context, ref: Ref) -> None:
    """Drop what this process remembers of the run ``ref`` (its thread was deleted)."""
    with _remembering:
        for operation in [op for op, known in ctx.runs.items() if known == ref]:
            ctx.runs.pop(operation, None)


def find_thread(ctx: Context, thread_id: str) -> Ref | None:
    """The run of ``thread_id``, or ``None`` if no checkpoint was ever put on it."""
    return current_run(ctx, ctx.thread_operation(thread_id))[0]


def find_namespace(ctx: Context, thread_id: str, checkpoint_ns: str) -> Ref | None:
    """The run holding ``checkpoint_ns`` of ``thread_id`` (the thread's own for ``""``)."""
    root = find_thread(ctx, thread_id)
    if root is None or not checkpoint_ns:
        return root
    return current_run(ctx, _namespace_operation(ctx, root, checkpoint_ns))[0]


def ensure_namespace(ctx: Context, thread_id: str, checkpoint_ns: str, agent_id: str) -> Ref:
    """The run holding ``checkpoint_ns`` of ``thread_id``; if new, started on a state naming it."""
    first = {"langgraph": THREAD_MARK, "thread_id": thread_id}
    root = _started(ctx, ctx.thread_operation(thread_id), agent_id, first, None)
    if not checkpoint_ns:
        return root
    operation = _namespace_operation(ctx, root, checkpoint_ns)
    state = {**first, "langgraph": NAMESPACE_MARK, "checkpoint_ns": checkpoint_ns}
    return _started(ctx, operation, agent_id, state, root.run_id)


def namespaces(store: Store, root: Ref) -> list[tuple[str, Ref]]:
    """Every namespace of the thread whose run is ``root``: the root first, then children."""
    found = [("", root)]
    for child in store.lineage(root.run_id).children:
        info = store.run(child)
        first = store.state_at(info.channel_id, 1)
        if first.state.get("langgraph") == NAMESPACE_MARK:
            found.append((str(first.state["checkpoint_ns"]), Ref(child, info.channel_id)))
    return found


def _namespace_operation(ctx: Context, root: Ref, checkpoint_ns: str) -> str:
    return operation_id(ctx.workflow_id, "ns", str(root.run_id), checkpoint_ns)


def current_run(ctx: Context, operation: str) -> tuple[Ref | None, str]:
    """The live run of ``operation``'s generations, and the id the next start would take."""
    generation, number = operation, 1
    while True:
        known = ctx.runs.get(generation)
        if known is not None:
            return known, generation
        record = ctx.store.operation(generation)
        if record is None:
            return None, generation
        key = _RUN_OF_COMMAND.get(record.command)
        if key is None:
            raise ValueError(
                f"operation id {generation!r} was used by {record.command!r}, not to start a "
                "LangGraph thread's run: choose another workflow_id for the saver"
            )
        info = ctx.store.run(record.result[key])
        if info.ended_at is None and info.forgotten_at is None and info.purged_at is None:
            ref = Ref(info.run_id, info.channel_id)
            remember(ctx.runs, generation, ref)
            return ref, generation
        number += 1
        generation = f"{operation}#{number}"


def _started(
    ctx: Context, operation: str, agent_id: str, state: Mapping[str, object], parent: UUID | None
) -> Ref:
    known, operation = current_run(ctx, operation)
    if known is not None:
        return known
    try:
        info = ctx.store.start_run(
            ctx.workflow_id,
            agent_id=agent_id,
            state=dict(state),
            operation_id=operation,
            parent_run_id=parent,
        )
    except OperationConflictError:
        # Started meanwhile by another process (under another agent id), or as a copy.
        found = current_run(ctx, operation)[0]
        if found is None:  # pragma: no cover - the conflict names a recorded operation
            raise
        return found
    ref = Ref(info.run_id, info.channel_id)
    remember(ctx.runs, operation, ref)
    return ref
