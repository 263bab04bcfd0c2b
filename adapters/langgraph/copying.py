"""``copy_thread``: the copy is an Actae fork of the source at its head, with its receipt.

Each other namespace, and the root of a target that exists already (Actae cannot fork into a
run), starts with a ``langgraph.copied`` record naming the source's channel and cursor.
"""

from __future__ import annotations

from actae.adapters.langgraph.encoding import COPIED, operation_id
from actae.adapters.langgraph.threads import (
    Context,
    Ref,
    current_run,
    ensure_namespace,
    find_thread,
    namespaces,
    remember,
)
from actae.adapters.langgraph.writing import mark
from actae.domain.errors import OperationConflictError


def copy_thread(ctx: Context, source: str, target: str) -> None:
    """Make ``target`` read as a copy of ``source`` as it is now; nothing if it is unknown."""
    root = find_thread(ctx, source)
    if root is None:
        return
    spaces = namespaces(ctx.store, root)
    if _forked(ctx, (source, target), root):
        spaces = spaces[1:]
    for checkpoint_ns, ref in spaces:
        _spliced(ctx, (source, target), checkpoint_ns, ref)


def _forked(ctx: Context, threads: tuple[str, str], root: Ref) -> bool:
    source, target = threads
    existing, operation = current_run(ctx, ctx.thread_operation(target))
    if existing is not None:
        return False  # the target thread has a run already (put on, or copied before)
    try:
        receipt = ctx.store.fork(
            root.channel_id,
            at=ctx.store.head(root.channel_id).cursor,
            operation_id=operation,
            reason=f"LangGraph copy_thread: thread {source!r} copied to thread {target!r}",
        )
    except OperationConflictError:
        return False  # the target thread has a run already (put on, or copied before)
    remember(ctx.runs, operation, Ref(receipt.child_run_id, receipt.child_channel_id))
    return True


def _spliced(ctx: Context, threads: tuple[str, str], checkpoint_ns: str, source: Ref) -> None:
    copy = ensure_namespace(ctx, threads[1], checkpoint_ns, ctx.agent_id)
    through = ctx.store.head(source.channel_id).cursor
    payload = {"channel_id": str(source.channel_id), "through": through, "thread_id": threads[0]}
    parts = (str(copy.channel_id), str(source.channel_id), str(through))
    mark(ctx, copy.channel_id, COPIED, payload, operation_id(ctx.workflow_id, "copied", *parts))
