"""What the command mixins (starting, forking) use of the application service."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any
from uuid import uuid4

if TYPE_CHECKING:
    from actae.domain.aggregate import Aggregate, DomainEvent
    from actae.domain.operation import Operation
    from actae.domain.ports import Clock
    from actae.domain.reader import StoreReader
    from actae.domain.validation import Document


def generated_operation_id(command: str) -> str:
    """An operation id made up for one call of ``command`` that was given none.

    The call saves its operation record under it, so when the store's answer to a write is
    lost and the call tries again, it finds its own earlier write instead of repeating it.
    """
    return f"{command}:{uuid4()}"


class CommandParts:
    """Declares, for type checkers, the parts of ActaeService that its command mixins call."""

    if TYPE_CHECKING:  # provided by ActaeService
        reader: StoreReader
        clock: Clock

        def _recorded(self, operation_id: str | None, content: str) -> Operation | None: ...

        def _save(
            self,
            objects: Sequence[Aggregate | DomainEvent],
            operation_id: str | None,
            command: str,
            content: str,
            result: dict[str, Any],
            at: datetime,
        ) -> Operation | None: ...

        def _canonical_text(self, value: object) -> str: ...

        def _document(self, field: str, value: object) -> Document: ...

    def _earlier(
        self, attempt: int, given: str | None, record_id: str, content: str
    ) -> Operation | None:
        """What an earlier attempt recorded under ``record_id``, refused if its content differs.

        A made-up id (none was ``given``) cannot have been recorded before this call's first
        write, so that first look is skipped.
        """
        if attempt == 0 and given is None:
            return None
        return self._recorded(record_id, content)
