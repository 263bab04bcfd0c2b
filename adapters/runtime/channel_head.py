"""Where a run context stands on its run's channel: the head its next write expects.

Each write of a context names the cursor it expects (``expected_cursor``), so a second
worker driving the same run is refused. Others may still write on the channel without
driving the run: lifecycle notes (a pause, a signal) and the ledger's notes of an effect's
settlement. The head moves past those, and past the context's own writes, never past a
rival's.
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
        """Move to a write of the context's own, also one recognised as a replay.

        After a lost reply the retried write replays the committed one; its cursor is still
        the context's newest, and the next write must expect it.
        """
        if receipt.cursor > self.receipt.cursor:
            self.receipt = receipt

    def adopt_notes(self) -> None:
        """Move past lifecycle and ledger notes that others wrote on the channel.

        Anything else written after the head means another worker drives this run: the
        stale head stays, and the next write is refused by ``expected_cursor``.
        """
        newer = self._reader.events(self._channel_id, after=self.receipt.cursor, limit=None)
        if all(event.kind.startswith(NOTE_KINDS) for event in newer):
            self.refresh()

    def past_notes(self, write: Callable[[], T]) -> T:
        """``write()``, written again past the notes that others put on the channel meanwhile.

        A step's result was paid for (a model sampled, tokens spent): a pause, a cancel, a
        signal or an effect's settlement noted while ``fn`` ran must not throw it away, or
        the step runs again after ``unpause``. The run then stops at the next boundary, with
        the result and its usage in history. Anything else written after the head means
        another worker drives the run, and the refusal stands.
        """
        while True:
            try:
                return write()
            except ConflictError:
                seen = self.receipt.cursor
                self.adopt_notes()
                if self.receipt.cursor <= seen:  # not moved past notes: a rival's write
                    raise
