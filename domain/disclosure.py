"""What a log line or a span may say about an error: contents stay where they are sealed.

An exception's message is contents: a tool's error echoes its input, a model's answer
quotes the prompt, a failed request repeats the key it was sent. On a store that encrypts
(opened with a keyring) the event log seals that message under the run's data key, and
``forget`` shreds it; a log line or a span shipped to a collector would keep it in clear,
out of reach of either. So on such a store what is said outside the store is the error's
type alone, and where to read the rest (the run, and the cursor of the record that holds
it), by someone who holds the keyring. On a clear store the message is said as it always
was: the store holds it in clear already.

This module is the one place either is decided: the worker's log lines and run outcomes
(``actae.run.outcome``) and every span's status and exception event say what it returns.
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
