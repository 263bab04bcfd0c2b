"""The redaction port: the domain's view of removing secrets before storage.

A :data:`Redactor` returns a new cleaned document and non-zero counts by pattern name, never the
secret; finding secrets is ``actae.adapters.redaction``'s business.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from actae.domain.errors import ValidationError
from actae.domain.validation import MAX_DEPTH, key_label, require_text

__all__ = ["PlainRedactor", "Redacted", "Redactor", "checked", "in_turn", "merge_counts"]


@dataclass(frozen=True, slots=True)
class Redacted:
    """A redactor's result: the cleaned document and positive counts by pattern name."""

    value: Any
    counts: dict[str, int]


Redactor = Callable[[Any], Redacted]
"""Takes a JSON document, returns a new, cleaned one with counts; never mutates its input."""


class PlainRedactor(ABC):
    """A redactor whose results are plain JSON by construction, so they are not checked."""

    __slots__ = ()

    @abstractmethod
    def __call__(self, document: Any) -> Redacted:
        """``document`` cleaned, with the counts of what left it."""


def merge_counts(*counts: Mapping[str, int]) -> dict[str, int]:
    """Counts summed by name, zeros left out."""
    total: dict[str, int] = {}
    for each in counts:
        for name, count in each.items():
            total[name] = total.get(name, 0) + count
    return {name: count for name, count in total.items() if count}


def in_turn(redactors: Sequence[Redactor], document: Any, *, where: str) -> Redacted:
    """``document`` through ``redactors`` in turn; non-plain results are :func:`checked`."""
    value = document
    counts: list[Mapping[str, int]] = []
    for index, redactor in enumerate(redactors):
        if not callable(redactor):
            raise ValidationError(
                f"{where}[{index}]", f"expected a redactor callable, got {type(redactor).__name__}"
            )
        result = redactor(value)
        if not isinstance(redactor, PlainRedactor):
            result = checked(result, where=f"{where}[{index}]")
        value = result.value
        counts.append(result.counts)
    return Redacted(value, merge_counts(*counts))


def checked(result: object, *, where: str) -> Redacted:
    """A redactor's ``result``, refused unless a :class:`Redacted` of plain JSON and counts >= 0."""
    if not isinstance(result, Redacted):
        raise ValidationError(
            where, f"a redactor must return Redacted(value, counts), got {type(result).__name__}"
        )
    problem = _not_plain_json(result.value, 1)
    if problem is not None:
        path, reason = problem
        raise ValidationError(".".join([f"{where}.value", *reversed(path)]), reason)
    counts = result.counts
    if not isinstance(counts, dict):
        raise ValidationError(
            f"{where}.counts", f"must be a dict of names to counts, got {type(counts).__name__}"
        )
    for name, count in counts.items():
        field = f"{where}.counts.{key_label(name)}"
        require_text(field, name)
        if isinstance(count, bool) or not isinstance(count, int):
            raise ValidationError(field, f"expected an int count, got {type(count).__name__}")
        if count < 0:
            raise ValidationError(field, f"must be >= 0, got {count}")
    if all(counts.values()) and type(counts) is dict:
        return result
    return Redacted(result.value, {name: count for name, count in counts.items() if count})


def _not_plain_json(value: object, depth: int) -> tuple[list[str], str] | None:
    """Where (path, innermost first) and why ``value`` is not plain JSON; None if it is."""
    if not isinstance(value, dict | list | tuple):
        reason = _scalar_problem(value)
        return None if reason is None else ([], reason)
    if depth > MAX_DEPTH:
        return [], f"nests deeper than {MAX_DEPTH} levels (or contains itself)"
    items: Iterable[tuple[object, object]]
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, item in items:
        if not isinstance(key, str) and isinstance(value, dict):
            return [], f"the key {key!r:.60} is a {type(key).__name__}; JSON keys are strings"
        problem = _not_plain_json(item, depth + 1)
        if problem is not None:
            problem[0].append(key_label(key) if isinstance(key, str) else str(key))
            return problem
    return None


def _scalar_problem(value: object) -> str | None:
    if value is None or isinstance(value, str | int):  # bool is an int
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{value} is not a JSON number"
    return f"a {type(value).__name__} is not plain JSON ({value!r:.60})"
