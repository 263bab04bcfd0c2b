"""Where a run context stands on its run's channel: the head its next write expects.

Each write names the cursor it expects, so a second worker driving the run is refused. The
head moves past the context's own writes and others' notes (a pause, a signal, an effect's
settlement), never past a rival's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar
from uuid import UUID

from actae.domain.errors import ConflictError
from actae.domain.reader import StoreReader
from actae.domain.values import Receipt

T = TypeVar("T")
NOTE_KINDS = ("run.", "effect.")
"""Kinds of the notes others write on a run's channel without driving the run."""


class ChannelHead:
    """The last event of one channel that its run context knows of."""

    def __init__(self, reader: StoreReader, channel_id: UUID) -> None:
        self._reader = reader
        self._channel_id = channel_id
        self.receipt = reader.head(channel_id)

    def refresh(self) -> None:
        """Adopt the channel's head after ledger notes the context wrote itself."""
        self.receipt = self._reader.head(self._channel_id)

    def adopt(self, receipt: Receipt) -> None:
        """Move to a write of the context's own, also one recognised as a replay (a lost reply)."""
        if receipt.cursor > self.receipt.cursor:
            self.receipt = receipt

    def adopt_notes(self) -> None:
        """Move past lifecycle and ledger notes that others wrote; never past a rival's write."""
        newer = self._reader.events(self._channel_id, after=self.receipt.cursor, limit=None)
        if all(event.kind.startswith(NOTE_KINDS) for event in newer):
            self.refresh()

    def past_notes(self, write: Callable[[], T]) -> T:
        """``write()``, written again past the notes that others put on the channel meanwhile.

        A step's result was paid for: a pause noted while ``fn`` ran must not throw it away.
        The run then stops at the next boundary, the result in history.
        """
        while True:
            try:
                return write()
            except ConflictError:
                seen = self.receipt.cursor
                self.adopt_notes()
                if self.receipt.cursor <= seen:  # not moved past notes: a rival's write
                    raise
