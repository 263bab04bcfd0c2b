"""Ports: what the domain needs from the outside world, stated as protocols.

The domain never imports a JSON library, a clock implementation or an event store;
adapters plug these in (``actae.adapters.persistence.eventlog`` is the event log over
eventsourcing's recorders).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol
from uuid import UUID

if TYPE_CHECKING:
    from actae.domain.aggregate import DomainEvent

Clock = Callable[[], datetime]
"""Returns the current time as a timezone-aware UTC datetime."""


class Codec(Protocol):
    """Turns JSON documents into canonical bytes, the basis of checksums and fingerprints."""

    def canonical(self, value: Any) -> bytes:
        """Encode ``value`` as canonical JSON (sorted keys, no whitespace).

        Raises ``TypeError`` or ``ValueError`` with a readable message when ``value`` holds
        something that is not plain JSON.
        """
        ...

    def canonical_with_hint(self, value: Any) -> tuple[bytes, bool]:
        """``canonical(value)``, and whether an integer beyond +-(2**53 - 1) may be inside.

        ``False`` guarantees there is none, sparing the validation a walk (free to encoders).
        """
        ...


class OperationRows(NamedTuple):
    """A request for an operation's record: its aggregate's events, or else its one row.

    A start, fork or effect is an Operation aggregate (``aggregate_id``); a record or a
    transition is its channel event, whose row carries ``operation_id``.
    """

    aggregate_id: UUID
    operation_id: str


Request = tuple[UUID, bool] | OperationRows
"""What :meth:`EventLog.together` reads: ``(originator_id, last_only)`` or an operation."""


class EventLog(Protocol):
    """The stored events, as the reader asks for them: by aggregate, or in global order.

    Events come back decoded, oldest first unless ``desc``. An aggregate's stream is
    gapless by construction: its versions are the store's primary key.
    """

    def stream(
        self,
        originator_id: UUID,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
    ) -> Iterable[DomainEvent]:
        """The aggregate's events with ``gt < version <= lte``, at most ``limit`` of them."""
        ...

    def together(self, requests: Sequence[Request]) -> list[list[DomainEvent]]:
        """Several aggregates' events at once, one list per request (see :data:`Request`).

        In one round trip where the backend can (a worker asks this before every step).
        """
        ...

    def in_order(
        self, *, after: int, limit: int, topics: Sequence[str]
    ) -> list[tuple[DomainEvent, int]]:
        """Events of the given ``topics`` after global position ``after``, with positions."""
        ...
