"""What a log line or span may say of an error: its message is contents, sealed if encrypted."""

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

    ``Type: message`` on a clear store; on a ``sealed`` one ``Type (sealed: read run <id> at cursor
    <n>)``, as much as is known.
    """
    kind = type(error).__name__
    if not sealed:
        return f"{kind}: {error}"
    if run_id is None:
        return kind
    at = "" if cursor is None else f" at cursor {cursor}"
    return f"{kind} (sealed: read run {run_id}{at})"
