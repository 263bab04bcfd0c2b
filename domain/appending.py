"""Appending to a channel: ``record`` (a result) and ``transition`` (a new state version).

Each command is a pure function of the caller's arguments: it validates all of them
(nothing read, nothing written on failure) and returns an :class:`Append`, which decides
over a channel head: whether the head is the one the caller expected (``expected_version``,
the state version, and ``expected_cursor``, the log position) and which event follows it.
The shell (``adapters/runtime/service.py``, ``ActaeService.append``) brings the head (this
process's guess, ``HeadCache``, or the store's), the time, and the write.

Given an ``operation_id``, the event is the command's operation record too: it carries the
command's content fingerprint, and its row the id, which the store keeps unique (one row
per write, where a separate record row cost a tenth of the write: docs/performance.md).
Anything refused on the way is explained from durable records before it is reported: a
failed check or a lost race looks up the ``operation_id`` first, so a repeat with the same
content returns the original receipt (``replayed=True``; a retry after a crash carries
stale expected values by construction) and different content is an
``OperationConflictError``; only then is it a ``ConflictError`` against the head as stored.
A command that succeeds has therefore read nothing: the store's unique index on the
operation id refuses a second execution inside the statement that would have written it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any
from uuid import UUID

from actae.domain.channel import Channel, ChannelHead
from actae.domain.operation import Operation
from actae.domain.pipeline import Core
from actae.domain.redaction import Redactor
from actae.domain.validation import (
    Document,
    fingerprint,
    optional_text,
    require_amounts,
    require_document,
    require_int,
    require_json,
    require_text,
    require_uuid,
)
from actae.domain.values import Receipt


@dataclass(frozen=True, slots=True)
class Append:
    """One checked append to a channel: what the caller expected, and the event it makes.

    ``expected_version`` is ``None`` for a record, which creates no state version and so
    guards only the log position. ``content`` is the command's fingerprint, what a repeat
    under ``operation_id`` must match to be answered as the original.
    """

    channel_id: UUID
    operation_id: str | None
    content: str
    expected_version: int | None
    expected_cursor: int
    event_after: Callable[..., Channel.Event]
    """``event_after(head, at=...)``: the event that follows ``head``, written ``at`` (pure)."""
    state: Document | None = None
    """A transition's validated state, which the event holds: its canonical bytes and their
    SHA-256 are written into the stored body as they are, not encoded and hashed again."""

    def fits(self, head: ChannelHead) -> bool:
        """Whether ``head`` is the one the caller expected."""
        return head.is_at(self.expected_version, self.expected_cursor)

    def ensure_fits(self, head: ChannelHead) -> None:
        """``ConflictError`` against ``head`` unless it is the one the caller expected."""
        head.ensure_at(expected_version=self.expected_version, expected_cursor=self.expected_cursor)

    def replayed(self, original: Operation) -> Receipt:
        """The receipt of the recorded execution ``original``, if its content is this one's.

        Different content under the same ``operation_id`` is an ``OperationConflictError``.
        """
        original.ensure_same(self.content)
        return Receipt(
            channel_id=self.channel_id,
            cursor=original.recorded_result["cursor"],
            state_version=original.recorded_result["state_version"],
            operation_id=original.operation_id,
            replayed=True,
        )


def record(
    core: Core,
    channel_id: UUID | str,
    *,
    kind: str,
    payload: dict[str, Any],
    expected_cursor: int,
    operation_id: str | None = None,
    usage: Mapping[str, float] | None = None,
    redact: Redactor | None = None,
) -> Append:
    """Record a result (a model call, a tool output) right after ``expected_cursor``.

    ``expected_cursor`` is the channel's log position the caller last saw (the state
    version is not checked: a record creates none). ``usage`` (e.g. ``{"tokens": 812,
    "cost": 0.02}``) adds to the run's running totals, which budgets are checked against.
    ``redact`` removes secrets from ``payload`` before the store's own redactor does; the
    event counts what left it (docs/data.md).
    """
    cid = require_uuid("channel_id", channel_id)
    kind = require_text("kind", kind)
    body, redacted = core.redacted("payload", payload, redact)
    spent = require_amounts("usage", usage)
    expected_cursor = require_int("expected_cursor", expected_cursor, minimum=1)
    operation_id = optional_text("operation_id", operation_id)
    usage_part = (str(sorted(spent.items())),) if spent else ()
    content = fingerprint("record", str(cid), kind, body.checksum, *usage_part)
    event_after = partial(
        Channel.recorded,
        kind=kind,
        payload=body.value,
        operation_id=operation_id,
        usage=spent,
        redacted=redacted,
        fingerprint=None if operation_id is None else content,
    )
    return Append(cid, operation_id, content, None, expected_cursor, event_after)


def transition(
    core: Core,
    channel_id: UUID | str,
    *,
    kind: str,
    payload: dict[str, Any],
    state: dict[str, Any],
    expected_version: int,
    expected_cursor: int,
    operation_id: str | None = None,
) -> Append:
    """Commit an event and the next state version together, or nothing at all.

    ``expected_version`` is the *state* version the caller last saw and
    ``expected_cursor`` the channel's *log* position: both must still be the head's;
    otherwise nothing is written and ``ConflictError`` reports what is stored.
    """
    cid = require_uuid("channel_id", channel_id)
    kind = require_text("kind", kind)
    limit = core.max_document_bytes
    payload, body = require_json("payload", payload, core.codec, max_bytes=limit)
    document = require_document("state", state, core.codec, max_bytes=limit)
    expected_version = require_int("expected_version", expected_version, minimum=1)
    expected_cursor = require_int("expected_cursor", expected_cursor, minimum=1)
    operation_id = optional_text("operation_id", operation_id)
    # One hash: the payload's canonical JSON holds no raw control character, so the parts
    # still read back one way (the state checksum has a fixed form, the kind is what is left).
    content = fingerprint("transition", str(cid), kind, body.decode(), document.checksum)
    event_after = partial(
        Channel.transitioned,
        kind=kind,
        payload=payload,
        state=document.value,
        state_checksum=document.checksum,
        operation_id=operation_id,
        fingerprint=None if operation_id is None else content,
    )
    return Append(
        cid, operation_id, content, expected_version, expected_cursor, event_after, document
    )
