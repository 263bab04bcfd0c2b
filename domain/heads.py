"""A per-process guess of each channel's head, so a command need not read it first.

A command checks ``expected_version`` (the state version) and ``expected_cursor`` (the log
position) against the channel head before it writes. Reading the head costs a round trip;
remembering the last head this process wrote or read saves it. The guess is never trusted for
correctness: a write built on a stale head asks the store for a cursor that is already taken,
the store refuses it (the primary key on ``(channel, cursor)``), and the command re-reads the
head before it answers. A guess that makes the check *fail* is re-read too, so a stale guess
can cost a round trip but never changes a result. Queries never use it; they read the store.

It also remembers which channel is each run's main channel, learnt from the ``run_id`` every
channel event carries. That fact never changes (a run has exactly one channel, opened with
it), so a remembered answer is always right and also proves that the run exists.
"""

from __future__ import annotations

import threading
from uuid import UUID

from actae.domain.channel import Channel, ChannelHead

DEFAULT_MAX_CHANNELS = 10_000


class HeadCache:
    """The newest head event seen per channel; forgets the oldest-entered past ``maxsize``."""

    def __init__(self, maxsize: int = DEFAULT_MAX_CHANNELS) -> None:
        self._maxsize = maxsize
        self._heads: dict[UUID, ChannelHead] = {}
        self._channels: dict[UUID, UUID] = {}
        self._lock = threading.Lock()

    def get(self, channel_id: UUID) -> ChannelHead | None:
        """The remembered head of ``channel_id``, if any (it may be stale)."""
        return self._heads.get(channel_id)

    def forget(self, channel_id: UUID) -> None:
        """Drop the guess for ``channel_id``: a write on it lost a race, so it is stale."""
        with self._lock:
            self._heads.pop(channel_id, None)

    def main_channel(self, run_id: UUID) -> UUID | None:
        """The main channel of ``run_id``, if an event of it was seen."""
        return self._channels.get(run_id)

    def put(self, event: Channel.Event) -> None:
        """Remember ``event``'s head fields unless a later event of its channel is known.

        Only the head is kept (:class:`ChannelHead`), not the payload or a transition's
        state: 10,000 remembered states of a megabyte each would hold gigabytes.
        """
        head = ChannelHead.of(event)
        with self._lock:
            if event.run_id not in self._channels:
                if len(self._channels) >= self._maxsize:
                    del self._channels[next(iter(self._channels))]
                self._channels[event.run_id] = event.originator_id
            known = self._heads.get(event.originator_id)
            if known is not None and known.originator_version >= event.originator_version:
                return
            if known is None and len(self._heads) >= self._maxsize:
                del self._heads[next(iter(self._heads))]
            self._heads[event.originator_id] = head

    def __len__(self) -> int:
        return len(self._heads)
