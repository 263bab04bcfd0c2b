"""The Operation aggregate: the durable identity of one logical command.

Its id is derived from the caller's ``operation_id`` (uuid5), so two attempts of the same
command contend for the same aggregate version and the event store's primary key decides
which one happened. It is saved in the same transaction as the command's own events.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID, uuid5

from actae.domain.aggregate import Aggregate
from actae.domain.errors import OperationConflictError

OPERATION_NAMESPACE = UUID("6f1e2a4c-3b5d-5e7f-8a9b-0c1d2e3f4a5b")


class Operation(Aggregate):
    """A command that happened once, with the fingerprint of its content and its result."""

    if TYPE_CHECKING:  # set by events' apply(); not dataclass fields
        operation_id: str
        command: str
        fingerprint: str
        result: dict[str, Any]

    class Executed(Aggregate.Created):
        """A command identified by ``operation_id`` was executed and produced ``result``."""

        operation_id: str
        command: str
        fingerprint: str
        result: dict[str, Any]

        def apply(self, aggregate: Any) -> None:
            """Remember the command's content fingerprint and its result."""
            aggregate.operation_id = self.operation_id
            aggregate.command = self.command
            aggregate.fingerprint = self.fingerprint
            aggregate.result = self.result

    @staticmethod
    def id_for(operation_id: str) -> UUID:
        """The aggregate id of an operation id: stable across processes and hosts."""
        return uuid5(OPERATION_NAMESPACE, operation_id)

    @classmethod
    def execute(
        cls,
        *,
        operation_id: str,
        command: str,
        fingerprint: str,
        result: dict[str, Any],
        at: datetime,
    ) -> Operation:
        """Record that the command ran and what it returned."""
        return cls._create(
            cls.Executed,
            id=cls.id_for(operation_id),
            timestamp=at,
            operation_id=operation_id,
            command=command,
            fingerprint=fingerprint,
            result=result,
        )

    def ensure_same(self, fingerprint: str) -> None:
        """Refuse a repeat whose content differs from the original command's."""
        if fingerprint != self.fingerprint:
            raise OperationConflictError(
                self.operation_id,
                recorded_fingerprint=self.fingerprint,
                presented_fingerprint=fingerprint,
            )
