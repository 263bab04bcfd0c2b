"""Input checks for every command and query.

Each check raises :class:`ValidationError` naming the field and the reason *before* anything
is read or written, so bad input can never leave a half-done command behind.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from uuid import UUID

from actae.domain.errors import ValidationError
from actae.domain.ports import Codec
from actae.domain.values import PIN_NAMES, Pins, pins_from_dict

MAX_TEXT_LENGTH = 512
MAX_REASON_LENGTH = 4096
DEFAULT_MAX_DOCUMENT_BYTES = 128 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Document:
    """A validated JSON object together with the checksum of its canonical encoding."""

    value: dict[str, Any]
    checksum: str
    size: int


def checksum_of(canonical: bytes) -> str:
    """The checksum format of the contract: ``sha256:<hex>``."""
    return "sha256:" + hashlib.sha256(canonical).hexdigest()


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
    return value


def optional_text(field: str, value: object, *, max_length: int = MAX_TEXT_LENGTH) -> str | None:
    """``None`` or a valid :func:`require_text` value."""
    return None if value is None else require_text(field, value, max_length=max_length)


def require_int(field: str, value: object, *, minimum: int) -> int:
    """An integer (not a bool) no smaller than ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(field, f"expected an integer, got {type(value).__name__}")
    if value < minimum:
        raise ValidationError(field, f"must be >= {minimum}, got {value}")
    return value


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
        require_text(f"{field}.{name}", name)
        amounts[name] = require_number(f"{field}.{name}", amount, minimum=0.0, maximum=1e18)
    return amounts


def optional_int(field: str, value: object, *, minimum: int) -> int | None:
    """``None`` or a valid :func:`require_int` value."""
    return None if value is None else require_int(field, value, minimum=minimum)


def require_document(field: str, value: object, codec: Codec, *, max_bytes: int) -> Document:
    """A JSON object (dict with string keys) that the codec can encode, within the size limit."""
    if not isinstance(value, dict):
        raise ValidationError(field, f"must be a JSON object (dict), got {type(value).__name__}")
    try:
        canonical = codec.canonical(value)
    except (TypeError, ValueError) as error:
        raise ValidationError(field, f"is not plain JSON: {error}") from None
    if b"null" in canonical and _has_non_finite_float(value):
        raise ValidationError(field, "contains NaN or Infinity, which JSON cannot represent")
    if len(canonical) > max_bytes:
        raise ValidationError(
            field, f"encodes to {len(canonical)} bytes, the limit is {max_bytes} bytes"
        )
    return Document(value=value, checksum=checksum_of(canonical), size=len(canonical))


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
    unknown = sorted(set(value) - set(PIN_NAMES))
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
