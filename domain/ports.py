"""Ports: what the domain needs from outside (JSON, a clock, the event store), as protocols."""

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
        """``value`` as canonical JSON; ``TypeError`` or ``ValueError`` if it is not plain JSON."""

    def canonical_with_hint(self, value: Any) -> tuple[bytes, bool]:
        """``canonical(value)``, and ``False`` only if no integer beyond +-(2**53 - 1) is inside."""


class OperationRows(NamedTuple):
    """A request for an operation's record: its aggregate's events, or its one channel row."""

    aggregate_id: UUID
    operation_id: str


Request = tuple[UUID, bool] | OperationRows
"""What :meth:`EventLog.together` reads: ``(originator_id, last_only)`` or an operation."""


class EventLog(Protocol):
    """The stored events, decoded, by aggregate (gapless, oldest first) or in global order."""

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

    def together(self, requests: Sequence[Request]) -> list[list[DomainEvent]]:
        """Several aggregates' events at once, one list per request, in one round trip if it can."""

    def in_order(
        self, *, after: int, limit: int, topics: Sequence[str]
    ) -> list[tuple[DomainEvent, int]]:
        """Events of the given ``topics`` after global position ``after``, with positions."""
