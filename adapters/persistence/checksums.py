"""Every stored event body carries a checksum, verified each time the body is read.

A flipped byte in a recorded step result must not be served as the result: the store's
promise is to *prove* from durable history what was done. Neither SQLite's nor PostgreSQL's
own checks see a byte changed inside a row that is still well formed (``PRAGMA
integrity_check`` says ``ok``), and AES-GCM authenticates only the sealed contents of an
encrypted store, not the clear metadata around them. So the mapper stamps each body as it
writes it, and checks the stamp before it decodes anything (``codec.py``): every read path
(the reader, ``recover``, ``events``, subscriptions, the projector, retention, the LangGraph
savers) decodes through it, on every backend.

**What it covers.** SHA-256 over the row's identity (topic, aggregate id, version) and the
body as the encoder wrote it, truncated to 128 bits. SHA-256 is what the store already uses
for content (``sha256:`` state checksums), and with the CPU's SHA instructions it costs
less than BLAKE2 here (docs/architecture.md, "Stored bodies carry a checksum"). Binding the
identity means a body copied to another row, or a changed topic or version, is refused
too. It detects corruption, not a deliberate rewrite: whoever can write rows can compute a
checksum (sealed contents stay authenticated by their run's key).

**Where it lives.** The last member of the body's JSON object, ``"$checksum":"<32 hex>"``,
so a body stays one JSON document for SQL (``convert_from(state, 'UTF8')::json``) and
operators. It has a fixed length, so it is found by position, without parsing.

**A body without one** is refused as corruption: every body Actae ever wrote has its
member, so one whose member is missing or damaged changed below Actae
(``tests/property/test_body_checksums.py`` flips every byte).
"""

from __future__ import annotations

import hashlib
from uuid import UUID

from eventsourcing.persistence import StoredEvent

from actae.domain.errors import CorruptionError

CHECKSUM = "$checksum"
"""The body member that holds the checksum (the last one)."""
OPENING = b',"' + CHECKSUM.encode() + b'":"'
DIGITS = 32
"""Hex digits kept of the SHA-256 (128 bits)."""
CLOSING = b'"}'
TAIL = len(OPENING) + DIGITS + len(CLOSING)
"""Bytes the checksum member adds at the end of the body."""
NOUNS = {
    "Channel": ("channel", "cursor"),
    "Run": ("run", "version"),
    "Operation": ("operation", "version"),
}
"""How an error names the aggregate whose name starts a topic, and the place in it."""


def stamped(topic: str, originator_id: UUID | str, version: int, body: bytes) -> bytes:
    """``body`` (a JSON object with at least one member) with its checksum as last member."""
    digest = checksum_of(topic, originator_id, version, body)
    return b"".join((memoryview(body)[:-1], OPENING, digest, CLOSING))


def verified(stored: StoredEvent) -> bytes:
    """The body as its encoder wrote it, once its checksum matches (else ``CorruptionError``)."""
    state = stored.state
    if state[-TAIL : -TAIL + len(OPENING)] != OPENING or state[-len(CLOSING) :] != CLOSING:
        raise CorruptionError(
            where(stored),
            "its body has no checksum member where every stored body has one: the row "
            "changed below Actae after it was written; restore it from a backup",
        )
    body = b"".join((memoryview(state)[:-TAIL], b"}"))
    recorded = bytes(state[-DIGITS - len(CLOSING) : -len(CLOSING)])
    actual = checksum_of(stored.topic, stored.originator_id, stored.originator_version, body)
    if actual != recorded:
        raise CorruptionError(
            where(stored),
            f"its checksum {recorded.decode(errors='replace')} does not match its body "
            f"(computed {actual.decode()}): the row changed below Actae after it was "
            "written; restore it from a backup",
        )
    return body


def checksum_of(topic: str, originator_id: UUID | str, version: int, body: bytes) -> bytes:
    """The checksum of ``body`` in its row, as the hex digits the body stores."""
    originator = originator_id.bytes if isinstance(originator_id, UUID) else originator_id.encode()
    digest = hashlib.sha256(b"%b|%b|%d|" % (topic.encode(), originator, version))
    digest.update(body)
    return digest.hexdigest()[:DIGITS].encode()


def where(stored: StoredEvent) -> str:
    """The stored event named as a user finds it: its channel and cursor, or aggregate."""
    noun, place = NOUNS.get(stored.topic.partition(".")[0], ("aggregate", "version"))
    return f"stored event of {noun} {stored.originator_id} at {place} {stored.originator_version}"
