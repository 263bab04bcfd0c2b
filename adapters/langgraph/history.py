"""What a thread's channel shows: its visible checkpoints and their pending writes.

Actae's log is append-only, so forgetting is itself an event (a tombstone, a prune, a
forget; see :mod:`~actae.adapters.langgraph.encoding`) and reading folds the channel from
its first event: :class:`Visible` applies each event in order. A copied thread reads its
source's history up to the cursor it was copied at, then its own: a fork's first event, or a
``langgraph.copied`` record, splices the source in where it stands.

Reading the whole history is the slow path. The common read, the latest checkpoint of a
namespace, is its channel's head (:func:`at_head`, one ``recover``): the state in force is
the checkpoint and the records after it are its writes. It answers whenever nothing after
that checkpoint could change what is visible, and says so otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from actae.adapters.langgraph.encoding import (
    CHECKPOINT,
    CHECKPOINT_MARK,
    COPIED,
    DELETED,
    DELETED_MARK,
    FORGOTTEN,
    PRUNED,
    WRITES,
    Packed,
)
from actae.adapters.runtime.store import Store
from actae.domain.values import ChannelEvent

PAGE = 500
"""Events read per call while folding a history."""

GLOBAL_PAGE = 2000
"""Events of all channels read per call while scanning the whole store."""

FORKED = "run.forked"
"""The first event of a run Actae forked: the source's history comes first."""


@dataclass(frozen=True, slots=True)
class StoredWrite:
    """One pending write as stored: its task, LangGraph's index, channel and packed value."""

    task_id: str
    task_path: str
    idx: int
    channel: str
    value: Packed


def writes_of(payload: dict[str, Any]) -> list[StoredWrite]:
    """The writes one ``langgraph.writes`` record holds."""
    return [
        StoredWrite(
            task_id=str(payload["task_id"]),
            task_path=str(payload.get("task_path", "")),
            idx=int(write["idx"]),
            channel=str(write["channel"]),
            value=write["value"],
        )
        for write in payload["writes"]
    ]


def add_writes(into: dict[tuple[str, int], StoredWrite], writes: list[StoredWrite]) -> None:
    """Add ``writes``, as LangGraph's savers store them, keyed by task and index.

    A special write (negative index: an error, an interrupt, a resume value) replaces the
    one before it; an ordinary write keeps the first stored, like an insert that ignores
    conflicts.
    """
    for write in writes:
        key = (write.task_id, write.idx)
        if write.idx < 0 or key not in into:
            into[key] = write


@dataclass(slots=True)
class Entry:
    """A visible checkpoint: where its state version is, its event, its writes."""

    checkpoint_id: str
    channel_id: UUID
    cursor: int
    payload: dict[str, Any]
    writes: dict[tuple[str, int], StoredWrite] = field(default_factory=dict)


class Visible:
    """The checkpoints a history shows, oldest first, each with its pending writes.

    Writes recorded before their checkpoint (LangGraph does not order them) wait in
    ``early`` until it comes; the markers that hide checkpoints drop them too.
    """

    def __init__(self) -> None:
        self.entries: dict[str, Entry] = {}
        self.early: dict[str, dict[tuple[str, int], StoredWrite]] = {}

    def latest(self) -> Entry | None:
        """The newest visible checkpoint (the last put), if any."""
        return next(reversed(self.entries.values()), None)

    def apply(self, event: ChannelEvent) -> None:
        """Fold one event of the channel in (splices are the caller's: they need reads)."""
        payload = event.contents()
        if event.kind == CHECKPOINT:
            self._checkpoint(event, payload)
        elif event.kind == WRITES:
            checkpoint_id = str(payload["checkpoint_id"])
            entry = self.entries.get(checkpoint_id)
            into = entry.writes if entry is not None else self.early.setdefault(checkpoint_id, {})
            add_writes(into, writes_of(payload))
        elif event.kind == DELETED:
            self.entries.clear()
            self.early.clear()
        elif event.kind == PRUNED:
            kept = self.entries.get(str(payload["keep"]))
            self.entries = {} if kept is None else {kept.checkpoint_id: kept}
            self.early.clear()
        elif event.kind == FORGOTTEN:
            for checkpoint_id in payload["checkpoint_ids"]:
                self.entries.pop(str(checkpoint_id), None)
                self.early.pop(str(checkpoint_id), None)

    def merge(self, source: Visible) -> None:
        """Splice a copied history in here: its checkpoints follow the ones before."""
        for checkpoint_id, entry in source.entries.items():
            mine = self.entries.get(checkpoint_id)
            if mine is None:
                self.entries[checkpoint_id] = Entry(
                    checkpoint_id, entry.channel_id, entry.cursor, entry.payload, dict(entry.writes)
                )
            else:  # copied twice: one checkpoint, the writes of both
                add_writes(mine.writes, list(entry.writes.values()))

    def _checkpoint(self, event: ChannelEvent, payload: dict[str, Any]) -> None:
        checkpoint_id = str(payload["checkpoint_id"])
        known = self.entries.get(checkpoint_id)
        if known is None:
            writes = self.early.pop(checkpoint_id, {})
            entry = Entry(checkpoint_id, event.channel_id, event.cursor, payload, writes)
            self.entries[checkpoint_id] = entry
        elif payload.get("revised"):  # put again with other content: the new one counts
            known.channel_id, known.cursor, known.payload = event.channel_id, event.cursor, payload


def history(store: Store, channel_id: UUID, through: int | None = None) -> Visible:
    """The visible checkpoints of a channel, as of cursor ``through`` (default: its head)."""
    visible = Visible()
    after = 0
    while True:
        limit = PAGE if through is None else min(PAGE, through - after)
        if limit <= 0:
            return visible
        page = store.events(channel_id, after, limit)
        for event in page:
            source = _spliced(store, event)
            if source is None:
                visible.apply(event)
            else:
                visible.merge(source)
        if len(page) < limit:
            return visible
        after = page[-1].cursor


def _spliced(store: Store, event: ChannelEvent) -> Visible | None:
    """The history ``event`` splices in here, if it is a copy or the first event of a fork."""
    if event.kind == COPIED:
        source = UUID(str(event.contents()["channel_id"]))
        return history(store, source, int(event.contents()["through"]))
    if event.kind == FORKED and event.cursor == 1:
        forked = store.run(event.run_id).forked_from
        if forked is not None:
            return history(store, forked.parent_channel_id, forked.requested_boundary)
    return None


@dataclass(frozen=True, slots=True)
class AtHead:
    """The latest checkpoint as the head shows it: its state, or none (the thread is empty)."""

    state: dict[str, Any] | None
    writes: list[StoredWrite]

    @property
    def checkpoint_id(self) -> str | None:
        """The latest checkpoint's id; ``None`` when no checkpoint is visible."""
        return None if self.state is None else str(self.state["checkpoint_id"])


def at_head(store: Store, channel_id: UUID) -> AtHead | None:
    """The latest checkpoint from the channel's head alone, or ``None`` when it cannot tell.

    It can tell when the state in force is a checkpoint this channel put (or a tombstone)
    and what follows is only writes, forgets of other checkpoints, or a prune that kept it:
    then nothing earlier can be visible over it. A copied history, a forget or prune that
    hides it, or a fork's inherited state need the whole fold. Writes recorded before the
    checkpoint are read from where its state says they start (``writes_from``).
    """
    recovery = store.recover(channel_id)
    state = recovery.state
    mark = state.state.get("langgraph")
    if state.cursor < 2 or mark not in (CHECKPOINT_MARK, DELETED_MARK):
        return None
    if mark == DELETED_MARK:
        copied = any(event.kind == COPIED for event in recovery.events)
        return None if copied else AtHead(None, [])
    if state.state.get("revised"):
        return None  # its writes from before the revision are further back
    checkpoint_id = str(state.state["checkpoint_id"])
    before: list[ChannelEvent] = []
    writes_from = state.state.get("writes_from")
    if writes_from is not None and int(writes_from) < state.cursor:
        start = int(writes_from) - 1
        before = store.events(channel_id, start, state.cursor - 1 - start)
    writes: dict[tuple[str, int], StoredWrite] = {}
    for event in before:  # older checkpoints and copies here change nothing about it
        if event.kind in (DELETED, PRUNED) or _forgets(event, checkpoint_id):
            return None  # it dropped early writes: the fold knows which
        _add_if_for(writes, event, checkpoint_id)
    for event in recovery.events:
        if not _keeps(event, checkpoint_id):
            return None
        _add_if_for(writes, event, checkpoint_id)
    return AtHead(state.state, list(writes.values()))


def _add_if_for(
    writes: dict[tuple[str, int], StoredWrite], event: ChannelEvent, checkpoint_id: str
) -> None:
    if event.kind == WRITES and event.contents()["checkpoint_id"] == checkpoint_id:
        add_writes(writes, writes_of(event.contents()))


def _forgets(event: ChannelEvent, checkpoint_id: str) -> bool:
    return event.kind == FORGOTTEN and checkpoint_id in event.contents()["checkpoint_ids"]


def _keeps(event: ChannelEvent, checkpoint_id: str) -> bool:
    """Whether ``event``, after the checkpoint, leaves it the latest visible one.

    A prune that keeps another, a forget that names it, a tombstone, a copied history
    (whose checkpoints would follow it) do not; writes and anything not the saver's do.
    """
    if event.kind == PRUNED:
        return bool(event.contents()["keep"] == checkpoint_id)
    if event.kind == FORGOTTEN:
        return not _forgets(event, checkpoint_id)
    return event.kind not in (COPIED, CHECKPOINT, DELETED)


def hidden_since(store: Store, channel_id: UUID, checkpoint_id: str, cursor: int) -> int | None:
    """The cursor of the last event after ``cursor`` that hides ``checkpoint_id``, if any.

    Asked when a put or a write replays an earlier one: if a tombstone, prune or forget
    came since, the earlier write is not visible, and the call must write again (under an
    operation id that names that event, so a retry of it replays in turn).
    """
    hidden: int | None = None
    after = cursor
    while True:
        page = store.events(channel_id, after, PAGE)
        for event in page:
            hides = event.kind in (PRUNED, FORGOTTEN) and not _keeps(event, checkpoint_id)
            if hides or event.kind == DELETED:
                hidden = event.cursor
        if len(page) < PAGE:
            return hidden
        after = page[-1].cursor


def scan_store(store: Store, visit: Callable[[ChannelEvent], None]) -> None:
    """Show ``visit`` every event of every channel in the store, in the store's order.

    For the calls LangGraph does not scope to a thread (``list(None)``,
    ``delete_for_runs``): they read the whole log, which is what an index would spare.
    """
    after = 0
    while True:
        page = store.events(None, after, GLOBAL_PAGE)
        for event in page:
            visit(event)
        last = page[-1].position if page else None
        if len(page) < GLOBAL_PAGE or last is None or last <= after:
            return
        after = last
