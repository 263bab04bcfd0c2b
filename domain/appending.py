"""Appending to a channel: ``record`` (a result) and ``transition`` (a new state version).

The order is the guarantee: validate all input (nothing read, nothing written on failure);
check ``expected_version`` (the state version) and ``expected_cursor`` (the log position)
against the channel head this process last saw (:mod:`actae.domain.heads`); save the event.
Given an ``operation_id``, the event is the command's operation record too: it carries the
command's content fingerprint, and its row the id, which the store keeps unique (one row
per write, where a separate record row cost a tenth of the write: docs/performance.md).

Anything refused on the way is explained from durable records before it is reported: a
failed check or a lost race looks up the ``operation_id`` first, so a repeat with the same
content returns the original receipt (``replayed=True``; a retry after a crash carries
stale expected values by construction) and different content is an
``OperationConflictError``; only then is it a ``ConflictError`` against the head as stored.
A command that succeeds has therefore read nothing: the store's unique index on the
operation id refuses a second execution inside the transaction that would have written it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from uuid import UUID

from actae.domain.channel import Channel, ChannelHead
from actae.domain.commands import Record, Transition
from actae.domain.errors import ConflictError
from actae.domain.operation import Operation
from actae.domain.pipeline import Core, Once, retried
from actae.domain.plan import NOW, Plan, Save, answered, ask
from actae.domain.reader import StoreReader, receipt_of
from actae.domain.validation import (
    fingerprint,
    optional_text,
    require_amounts,
    require_int,
    require_text,
    require_uuid,
)
from actae.domain.values import Receipt


def record(command: Record, core: Core) -> Plan[Receipt]:
    """Append a recorded result after ``expected_cursor`` (the channel's log position).

    A record creates no state version, so the state version is not checked. ``usage``
    (e.g. ``{"tokens": 812, "cost": 0.02}``) adds to the run's running totals, which budgets
    are checked against.
    """
    cid = require_uuid("channel_id", command.channel_id)
    kind = require_text("kind", command.kind)
    body, redacted = core.redacted("payload", command.payload, command.redact)
    spent = require_amounts("usage", command.usage)
    expected_cursor = require_int("expected_cursor", command.expected_cursor, minimum=1)
    operation_id = optional_text("operation_id", command.operation_id)
    usage_part = (str(sorted(spent.items())),) if spent else ()  # old fingerprints stay valid
    content = fingerprint("record", str(cid), kind, body.checksum, *usage_part)

    def event_after(head: ChannelHead, at: datetime) -> Channel.Event:
        return Channel.recorded(
            head,
            kind=kind,
            payload=body.value,
            operation_id=operation_id,
            at=at,
            usage=spent,
            redacted=redacted,
            fingerprint=None if operation_id is None else content,
        )

    once = _once(cid, operation_id, "record", content)
    return (yield from _appended(core, cid, once, (None, expected_cursor), event_after))


def transition(command: Transition, core: Core) -> Plan[Receipt]:
    """Append an event and the state version it creates, atomically.

    The head must still be at ``expected_version`` (the *state* version the caller last
    saw) and ``expected_cursor`` (the channel's *log* position); otherwise nothing is
    written and ``ConflictError`` reports what is stored.
    """
    cid = require_uuid("channel_id", command.channel_id)
    kind = require_text("kind", command.kind)
    body = core.document("payload", command.payload)
    document = core.document("state", command.state)
    expected_version = require_int("expected_version", command.expected_version, minimum=1)
    expected_cursor = require_int("expected_cursor", command.expected_cursor, minimum=1)
    operation_id = optional_text("operation_id", command.operation_id)
    content = fingerprint("transition", str(cid), kind, body.checksum, document.checksum)

    def event_after(head: ChannelHead, at: datetime) -> Channel.Event:
        return Channel.transitioned(
            head,
            kind=kind,
            payload=body.value,
            state=document.value,
            state_checksum=document.checksum,
            operation_id=operation_id,
            at=at,
            fingerprint=None if operation_id is None else content,
        )

    once = _once(cid, operation_id, "transition", content)
    expected = (expected_version, expected_cursor)
    return (yield from _appended(core, cid, once, expected, event_after))


def reread_head(core: Core, channel_id: UUID) -> Plan[ChannelHead]:
    """The channel's head as stored (one read), remembered as this process's new guess."""
    event = yield from ask(StoreReader.head_event, channel_id)
    core.heads.put(event)
    return ChannelHead.of(event)


def _once(cid: UUID, operation_id: str | None, command: str, content: str) -> Once[Receipt] | None:
    if operation_id is None:
        return None

    def replay(original: Operation) -> Plan[Receipt]:
        return answered(_replayed(cid, original))

    return Once(operation_id, command, content, replay, look_first=False)


def _appended(
    core: Core,
    cid: UUID,
    once: Once[Receipt] | None,
    expected: tuple[int | None, int],
    event_after: Callable[[ChannelHead, datetime], Channel.Event],
) -> Plan[Receipt]:
    """Append ``event_after(head, now)`` where the caller ``expected`` the head; its receipt.

    ``expected`` is (``expected_version``, ``expected_cursor``); ``None`` for a record,
    which creates no state version and so guards only the log position.
    """

    def attempt(number: int) -> Plan[Receipt]:
        head = core.heads.get(cid)
        if head is None or not head.is_at(*expected):  # the guess reads nothing: the hot path
            checked = yield from _head_at(core, cid, head, once, number, *expected)
            if isinstance(checked, Receipt):
                return checked
            head = checked
        at: datetime = yield NOW
        event = event_after(head, at)
        yield Save((event,))
        return receipt_of(event)

    return (yield from retried(attempt, lambda: f"channel {cid}", once=once))


def _head_at(
    core: Core,
    channel_id: UUID,
    guess: ChannelHead | None,
    once: Once[Receipt] | None,
    number: int,
    expected_version: int | None,
    expected_cursor: int,
) -> Plan[ChannelHead | Receipt]:
    """The channel's head if it is the one the caller expects, or the replay of an earlier run.

    Called when this process's ``guess`` of the head is missing or not the expected one. A
    mismatch is checked against the operation record first (on the first attempt: after a
    lost race the pipeline has looked already), because a retried command carries stale
    expected values by construction, and then against the head as stored.
    """
    head = guess or (yield from reread_head(core, channel_id))
    try:
        head.ensure_at(expected_version=expected_version, expected_cursor=expected_cursor)
    except ConflictError:
        original = None if once is None or number > 0 else (yield from once.earlier())
        if original is not None:
            return _replayed(channel_id, original)
        if guess is None:
            raise
        head = yield from reread_head(core, channel_id)
        head.ensure_at(expected_version=expected_version, expected_cursor=expected_cursor)
    return head


def _replayed(channel_id: UUID, original: Operation) -> Receipt:
    return Receipt(
        channel_id=channel_id,
        cursor=original.recorded_result["cursor"],
        state_version=original.recorded_result["state_version"],
        operation_id=original.operation_id,
        replayed=True,
    )
