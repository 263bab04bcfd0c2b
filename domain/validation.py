"""Input checks for every command and query.

Each check raises :class:`ValidationError` naming the field and the reason *before* anything
is read or written, so bad input can never leave a half-done command behind.

What every backend and the read models can hold sets the rules, so a value that one of
them would refuse or mangle later (a projector that logs errors forever, a run_status row
with a NULL status) is refused here, at the call, on every backend alike:

- text (ids, kinds, names, keys, reasons) and every string in a JSON document, dict keys
  included, is valid Unicode without NUL: PostgreSQL's text and jsonb cannot hold U+0000
  and SQLite's SQL functions cut a string there; a lone surrogate cannot be encoded at all;
- integers that are stored as integers (cursors, versions, limits, tokens, the schema pin,
  every integer in a JSON document) lie within signed 64 bits, PostgreSQL's ``bigint``;
- a JSON document nests at most :data:`MAX_DEPTH` levels (the document itself is level 1),
  well inside the JSON encoder's and the databases' own recursion limits.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, NamedTuple
from uuid import UUID

from actae.domain.errors import ValidationError
from actae.domain.ports import Codec
from actae.domain.values import PIN_NAMES, Pins, pins_from_dict

MAX_TEXT_LENGTH = 512
MAX_REASON_LENGTH = 4096
DEFAULT_MAX_DOCUMENT_BYTES = 128 * 1024 * 1024
MAX_INT64 = 2**63 - 1
MIN_INT64 = -(2**63)
MAX_DEPTH = 64
"""Deepest nesting of a JSON document (objects and lists; the document is level 1)."""
BRACKETS = (b"{", b"[")
"""What opens a level in a document's JSON."""
SHALLOW_BELOW = 2 * (MAX_DEPTH + 1)
"""Encodings shorter than this cannot nest deeper than ``MAX_DEPTH``: each level opens and
closes a bracket."""
CONTAINERS = (dict, list, tuple)
"""What nests in a document (a tuple of types: ``isinstance`` is fastest with one)."""


class Document(NamedTuple):
    """A validated JSON object, its canonical encoding and the checksum of that encoding.

    ``sha256`` is the encoding's SHA-256 left open: a checksum over bytes that start with
    the encoding (a transition's stored body, :mod:`actae.adapters.persistence.codec`)
    continues a copy of it instead of hashing the document again. A tuple: made on every
    write, where a frozen dataclass's ``__init__`` costs a call per field.
    """

    value: dict[str, Any]
    canonical: bytes
    checksum: str
    sha256: Any


CHECKSUM_FORMAT = "sha256:"
"""How the contract's checksums start: ``sha256:<hex>``."""


def checksum_of(canonical: bytes) -> str:
    """The checksum of ``canonical`` in the contract's format."""
    return CHECKSUM_FORMAT + hashlib.sha256(canonical).hexdigest()


def fingerprint(*parts: str) -> str:
    """Checksum of a command's content, given as already-canonical text parts."""
    return checksum_of("\x1f".join(parts).encode())


def require_uuid(field: str, value: object) -> UUID:
    """A UUID, given as :class:`uuid.UUID` or its string form."""
    if isinstance(value, UUID):
        return value
    if isinstance(value, str):
        try:
            return UUID(value)
        except ValueError:
            pass
    raise ValidationError(field, f"expected a UUID (or its string form), got {value!r:.80}")


def require_text(field: str, value: object, *, max_length: int = MAX_TEXT_LENGTH) -> str:
    """A non-empty string of bounded length (ids, kinds, names)."""
    if not isinstance(value, str):
        raise ValidationError(field, f"expected a string, got {type(value).__name__}")
    if not value.strip():
        raise ValidationError(field, "must not be empty")
    if len(value) > max_length:
        raise ValidationError(field, f"is {len(value)} characters, the limit is {max_length}")
    if "\x00" in value or not value.isascii():  # ASCII without NUL: storable as it is
        require_storable(field, value)
    return value


def require_storable(field: str, text: str) -> None:
    """Refuse text that a backend cannot store as given: NUL, or a lone surrogate."""
    if "\x00" in text:
        raise ValidationError(field, "contains a NUL character (U+0000), which cannot be stored")
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError as error:
            raise ValidationError(
                field, f"is not valid Unicode: a lone surrogate at position {error.start}"
            ) from None


def optional_text(field: str, value: object, *, max_length: int = MAX_TEXT_LENGTH) -> str | None:
    """``None`` or a valid :func:`require_text` value."""
    return None if value is None else require_text(field, value, max_length=max_length)


def require_int(field: str, value: object, *, minimum: int, maximum: int = MAX_INT64) -> int:
    """An integer (not a bool) within ``[minimum, maximum]``.

    The default maximum is the largest signed 64-bit integer, which every backend stores.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(field, f"expected an integer, got {type(value).__name__}")
    if value < minimum:
        raise ValidationError(field, f"must be >= {minimum}, got {_shown(value)}")
    if value > maximum:
        raise ValidationError(field, f"must be <= {maximum}, got {_shown(value)}")
    return value


def key_label(key: object) -> str:
    """A caller's dict key as part of a field name: as given if printable, else escaped.

    A field name must print, even when the key is the bad input.
    """
    return key if isinstance(key, str) and key.isprintable() else ascii(key)


def _shown(number: int) -> str:
    """An integer for an error message (Python refuses to print one of 4,300+ digits)."""
    return str(number) if number.bit_length() <= 128 else f"a {number.bit_length()}-bit integer"


def require_number(field: str, value: object, *, minimum: float, maximum: float) -> float:
    """A real number (int or float, not bool) within ``[minimum, maximum]``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(field, f"expected a number of seconds, got {type(value).__name__}")
    if not minimum <= value <= maximum:
        raise ValidationError(field, f"must be between {minimum} and {maximum}, got {value}")
    return float(value)


def require_retry_after(field: str, value: object, *, now: datetime, maximum: float) -> float:
    """Seconds to wait, from a number or an HTTP ``Retry-After`` value as the header gave it.

    The header holds either delay-seconds (``"30"``) or an HTTP date; a date in the past
    means 0 seconds. A wait beyond ``maximum`` is taken as ``maximum`` (no retry policy
    waits that long anyway), so a provider's odd answer never keeps a failed attempt from
    being recorded. Negative, infinite or unreadable values are refused.
    """
    if isinstance(value, str):
        seconds = _header_seconds(field, value.strip(), now)
    elif isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(field, f"expected a number of seconds, got {type(value).__name__}")
    else:
        seconds = float(value)
    if not math.isfinite(seconds) or seconds < 0:
        raise ValidationError(field, f"expected a finite number of seconds >= 0, got {value!r}")
    return min(seconds, maximum)


def _header_seconds(field: str, text: str, now: datetime) -> float:
    """Delay-seconds or an HTTP date (RFC 9110), as seconds from ``now``."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        moment = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        raise ValidationError(
            field, f"expected seconds or an HTTP date, got {text[:40]!r}"
        ) from None
    if moment.tzinfo is None:  # HTTP dates are GMT
        moment = moment.replace(tzinfo=UTC)
    return max(0.0, (moment - now).total_seconds())


def require_amounts(field: str, value: object) -> dict[str, float]:
    """A mapping of names to non-negative finite numbers (usage, budgets)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValidationError(field, f"must be a dict of numbers, got {type(value).__name__}")
    amounts: dict[str, float] = {}
    for name, amount in value.items():
        label = f"{field}.{key_label(name)}"
        require_text(label, name)
        amounts[name] = require_number(label, amount, minimum=0.0, maximum=1e18)
    return amounts


def optional_int(field: str, value: object, *, minimum: int) -> int | None:
    """``None`` or a valid :func:`require_int` value."""
    return None if value is None else require_int(field, value, minimum=minimum)


def require_document(field: str, value: object, codec: Codec, *, max_bytes: int) -> Document:
    """:func:`require_json`'s document, with the checksum of its canonical encoding."""
    document, canonical = require_json(field, value, codec, max_bytes=max_bytes)
    sha256 = hashlib.sha256(canonical)
    return Document(document, canonical, CHECKSUM_FORMAT + sha256.hexdigest(), sha256)


def require_json(
    field: str, value: object, codec: Codec, *, max_bytes: int
) -> tuple[dict[str, Any], bytes]:
    """A JSON object (dict with string keys) and its canonical encoding, within the rules.

    That is: within the size limit, storable strings, 64-bit integers, ``MAX_DEPTH`` deep.
    The canonical encoding is needed anyway (for the checksum); the rules piggy-back on it so
    that a typical document costs a few substring searches: the encoder already refuses lone
    surrogates and reports whether a wide integer is inside; it writes NUL as an escape
    (backslash, ``u0000``), found by a substring search where there is a backslash at all
    (a byte search); a document with no more than ``MAX_DEPTH`` brackets, or too short to
    hold more, cannot nest deeper (:func:`_more_brackets`). Only when a hint fires is the
    document walked to be sure.
    """
    if not isinstance(value, dict):
        raise ValidationError(field, f"must be a JSON object (dict), got {type(value).__name__}")
    try:
        canonical, wide_integers = codec.canonical_with_hint(value)
    except (TypeError, ValueError) as error:
        if _nests_deeper(value, MAX_DEPTH):  # the encoder's own recursion limit, or a cycle
            raise _too_deep(field) from None
        raise ValidationError(field, f"is not plain JSON: {error}") from None
    if b"null" in canonical and _has_non_finite_float(value):
        raise ValidationError(field, "contains NaN or Infinity, which JSON cannot represent")
    if wide_integers and (outside := _integer_outside_int64(value)) is not None:
        raise ValidationError(
            field, f"holds the integer {_shown(outside)}, outside the signed 64-bit range"
        )
    if b"\\" in canonical and b"\\u0000" in canonical and _holds_nul(value):
        raise ValidationError(
            field, "holds a string or key with a NUL character (U+0000), which cannot be stored"
        )
    deep = len(canonical) >= SHALLOW_BELOW  # a shorter one cannot nest deeper
    if deep and _more_brackets(canonical, MAX_DEPTH) and _nests_deeper(value, MAX_DEPTH):
        raise _too_deep(field)
    if len(canonical) > max_bytes:
        raise ValidationError(
            field, f"encodes to {len(canonical)} bytes, the limit is {max_bytes} bytes"
        )
    return value, canonical


def _more_brackets(canonical: bytes, limit: int) -> bool:
    """Whether ``canonical`` holds more than ``limit`` opening brackets.

    A sound hint: with no more, nothing nests deeper than ``limit`` (a bracket inside a
    string only overcounts). Found one at a time with ``find`` (a ``memchr``, many times
    faster per byte than a ``count``), stopping at the ``limit + 1``-th: a document with
    few brackets costs a few searches whatever its size, one with many ``limit + 1``.
    """
    found = 0
    for bracket in BRACKETS:
        at = canonical.find(bracket)
        while at >= 0:
            found += 1
            if found > limit:
                return True
            at = canonical.find(bracket, at + 1)
    return False


def _too_deep(field: str) -> ValidationError:
    return ValidationError(field, f"nests deeper than {MAX_DEPTH} levels (or contains itself)")


def _nests_deeper(value: object, limit: int) -> bool:
    """Whether objects and lists in ``value`` nest more than ``limit`` levels.

    Containers are collected level by level, each once (keyed by identity, so a value the
    encoder refused because it contains itself cannot double a level): paid only by
    documents with more than ``MAX_DEPTH`` brackets, or ones the encoder refused.
    """
    level: Iterable[Any] = [value]
    for _ in range(limit):
        below: dict[int, Any] = {}
        for item in level:
            for child in item.values() if isinstance(item, dict) else item:
                if isinstance(child, CONTAINERS):
                    below[id(child)] = child
        if not below:
            return False
        level = below.values()
    return True


def _integer_outside_int64(value: object) -> int | None:
    """The first integer in ``value`` outside the signed 64-bit range, if any."""
    if isinstance(value, int) and not isinstance(value, bool):
        return None if MIN_INT64 <= value <= MAX_INT64 else value
    if isinstance(value, dict):
        value = value.values()
    elif not isinstance(value, list | tuple):
        return None
    for item in value:
        if (outside := _integer_outside_int64(item)) is not None:
            return outside
    return None


def _holds_nul(value: object) -> bool:
    """Whether a string or a dict key in ``value`` contains a NUL character."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any("\x00" in key for key in value) or any(map(_holds_nul, value.values()))
    if isinstance(value, list | tuple):
        return any(map(_holds_nul, value))
    return False


def _has_non_finite_float(value: object) -> bool:
    """Whether a NaN or infinity hides in ``value`` (JSON encoders write them as null)."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_has_non_finite_float(item) for item in value.values())
    if isinstance(value, list | tuple):
        return any(_has_non_finite_float(item) for item in value)
    return False


def require_pins(field: str, value: object) -> Pins:
    """Pins given as a dict with contract names; unknown names and wrong types are refused."""
    if value is None:
        value = {}
    if isinstance(value, Pins):
        value = value.as_dict()
    if not isinstance(value, dict):
        raise ValidationError(field, f"must be a dict, got {type(value).__name__}")
    unknown = sorted(map(key_label, set(value) - set(PIN_NAMES)))
    if unknown:
        raise ValidationError(f"{field}.{unknown[0]}", f"unknown pin; known: {PIN_NAMES}")
    for name in ("model", "prompt", "tools"):
        optional_text(f"{field}.{name}", value.get(name))
    optional_int(f"{field}.schema", value.get("schema"), minimum=1)
    return pins_from_dict(value)


def optional_deadline(field: str, value: object) -> datetime | None:
    """``None`` or a timezone-aware datetime."""
    if value is None:
        return None
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise ValidationError(field, "must be a timezone-aware datetime")
    return value


TRACE_CONTEXT_ENTRIES = 16
"""Most entries of a trace context kept with a run (a propagator writes two or three)."""


def storable_trace_context(given: Mapping[str, str] | None) -> dict[str, str]:
    """The entries of a propagated trace context that every backend can keep.

    Tracing is advisory: however the caller's propagators are set up, a run must start, so
    an entry that could not be stored (not text, too long, a NUL) is left out, not refused.
    """
    kept: dict[str, str] = {}
    if not isinstance(given, Mapping):
        return kept
    for key, value in given.items():
        try:
            require_text("trace_context", key)
            require_text("trace_context", value, max_length=MAX_REASON_LENGTH)
        except ValidationError:
            continue
        kept[key] = value
        if len(kept) == TRACE_CONTEXT_ENTRIES:
            break
    return kept
