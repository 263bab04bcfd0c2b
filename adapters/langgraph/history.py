"""What a thread's channel shows: its visible checkpoints and their pending writes.

Hiding is itself an event (a prune, a forget), so reading folds the channel from its start
(:class:`Visible`), splicing in a copy's source; a namespace's latest checkpoint is read from
the head instead (:func:`at_head`) when nothing after it could change what is visible.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any
from uuid import UUID

from actae.adapters.langgraph.encoding import (
    CHECKPOINT,
    CHECKPOINT_MARK,
    COPIED,
    FORGOTTEN,
    PRUNED,
    WRITES,
    Packed,
)
from actae.adapters.runtime.store import Store
from actae.domain.values import ChannelEvent

PAGE = 500  # events read per call while folding a history
GLOBAL_PAGE = 2000  # events of all channels read per call while scanning the whole store
FORKED = "run.forked"  # a forked run's first event: the source's history comes first


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
    """Add ``writes`` by task and index: a special one (negative index) replaces, others not."""
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
    """The checkpoints a history shows, oldest first, with their writes (early ones wait)."""

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
                self.entries[checkpoint_id] = replace(entry, writes=dict(entry.writes))
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


def events(
    store: Store, channel_id: UUID | None, after: int = 0, through: int | None = None
) -> Iterator[ChannelEvent]:
    """A page at a time: the channel's events after ``after`` (to ``through``); ``None``: all."""
    size = GLOBAL_PAGE if channel_id is None else PAGE
    while True:
        limit = size if through is None else min(size, through - after)
        if limit <= 0:
            return
        page = store.events(channel_id, after, limit)
        yield from page
        if len(page) < limit:
            return
        last = page[-1].position if channel_id is None else page[-1].cursor
        if last is None or last <= after:
            return
        after = last


def history(store: Store, channel_id: UUID, through: int | None = None) -> Visible:
    """The visible checkpoints of a channel, as of cursor ``through`` (default: its head)."""
    visible = Visible()
    for event in events(store, channel_id, through=through):
        source = _spliced(store, event)
        if source is None:
            visible.apply(event)
        else:
            visible.merge(source)
    return visible


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
    """The latest checkpoint as the head shows it: its id, its state and its writes."""

    checkpoint_id: str
    state: dict[str, Any]
    writes: list[StoredWrite]


def at_head(store: Store, channel_id: UUID) -> AtHead | None:
    """The latest checkpoint from the channel's head alone, or ``None`` when it cannot tell.

    It can when the state in force is a checkpoint this channel put and what follows is only
    writes, forgets of others, or a prune that kept it.
    """
    recovery = store.recover(channel_id)
    state = recovery.state
    if state.cursor < 2 or state.state.get("langgraph") != CHECKPOINT_MARK:
        return None  # no checkpoint, or a fork's inherited one: the fold knows
    if state.state.get("revised"):
        return None  # its writes from before the revision are further back
    checkpoint_id = str(state.state["checkpoint_id"])
    writes_from = int(state.state.get("writes_from", state.cursor))
    writes: dict[tuple[str, int], StoredWrite] = {}
    for event in events(store, channel_id, writes_from - 1, state.cursor - 1):
        # Older checkpoints and copies here change nothing about it.
        if event.kind == PRUNED or _forgets(event, checkpoint_id):
            return None  # it dropped early writes: the fold knows which
        _add_if_for(writes, event, checkpoint_id)
    for event in recovery.events:
        if not _keeps(event, checkpoint_id):
            return None
        _add_if_for(writes, event, checkpoint_id)
    return AtHead(checkpoint_id, state.state, list(writes.values()))


def _add_if_for(
    writes: dict[tuple[str, int], StoredWrite], event: ChannelEvent, checkpoint_id: str
) -> None:
    if event.kind == WRITES and event.contents()["checkpoint_id"] == checkpoint_id:
        add_writes(writes, writes_of(event.contents()))


def _forgets(event: ChannelEvent, checkpoint_id: str) -> bool:
    return event.kind == FORGOTTEN and checkpoint_id in event.contents()["checkpoint_ids"]


def _keeps(event: ChannelEvent, checkpoint_id: str) -> bool:
    """Whether ``event``, after the checkpoint, leaves it the latest visible one."""
    if event.kind == PRUNED:
        return bool(event.contents()["keep"] == checkpoint_id)
    if event.kind == FORGOTTEN:
        return not _forgets(event, checkpoint_id)
    return event.kind not in (COPIED, CHECKPOINT)  # a copy's checkpoints would follow it


def hidden_since(store: Store, channel_id: UUID, checkpoint_id: str, cursor: int) -> int | None:
    """The cursor of the last prune or forget after ``cursor`` that hides ``checkpoint_id``."""
    hidden: int | None = None
    for event in events(store, channel_id, cursor):
        if event.kind in (PRUNED, FORGOTTEN) and not _keeps(event, checkpoint_id):
            hidden = event.cursor
    return hidden
