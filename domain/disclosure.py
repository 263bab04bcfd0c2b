"""What a log line or a span may say about an error: contents stay where they are sealed.

An exception's message is contents (a tool's error echoes its input). On a store that
encrypts, the event log seals it and ``forget`` shreds it, so a log line or a span names
the error's type alone and where to read the rest; on a clear store it says the message.
This module is the one place that is decided, for log lines, run outcomes and spans.
"""

from __future__ import annotations

from uuid import UUID

__all__ = ["error_text"]


def error_text(
    error: BaseException,
    *,
    sealed: bool,
    run_id: UUID | str | None = None,
    cursor: int | None = None,
) -> str:
    """What may be said of ``error`` outside the store.

    On a clear store ``Type: message``. On a ``sealed`` one ``Type`` alone, followed by
    where the message can be read when that is known: ``Type (sealed: read run <id> at
    cursor <n>)`` (without the cursor when the record's position is not known where the
    text is made, say in the span of the step that raised it).
    """
    kind = type(error).__name__
    if not sealed:
        return f"{kind}: {error}"
    if run_id is None:
        return kind
    at = "" if cursor is None else f" at cursor {cursor}"
    return f"{kind} (sealed: read run {run_id}{at})"
