"""The part of a channel event the read models take: its head, never its payload or state.

Channel events are most of a store, and the read models read eight of their fields
(:func:`~actae.projections.project.project`'s channel handler). A catch-up validating only
those, by the same annotations as :class:`~actae.domain.channel.Channel.Event`, spares
walking the payload and the state the whole event's validation walks. The store's mapper
decides when the head is enough: its body verified, and its contents in clear
(``to_read_event`` in ``adapters/persistence/codec.py``).
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field


class ChannelEventHead(BaseModel):
    """A channel event's identity, time and head fields, the rest of its body ignored.

    ``kind`` is the event's, the others describe the channel head after it. The annotations
    are ``Channel.Event``'s (a test holds them equal), so a head has the values its event has.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    originator_id: UUID
    originator_version: int
    timestamp: datetime
    run_id: UUID
    kind: str
    state_version: int
    open_effects: tuple[str, ...] = ()
    usage: dict[str, float] = Field(default_factory=dict)
