"""Redaction of the values inside LangGraph's serde blobs, *before* they are packed.

Plain JSON goes to the redactor whole (a ``password`` key still empties its value);
containers, pydantic models, dataclasses, ``Send`` and exceptions part by part, rebuilt only
when something changed. Anything else is refused: storing it would keep its secret.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import decimal
import enum
import math
import uuid
from collections.abc import Callable
from typing import Any

from langgraph.checkpoint.base import Checkpoint
from langgraph.types import Send
from pydantic import BaseModel

from actae.domain.errors import ValidationError
from actae.domain.redaction import Redacted, Redactor, checked, merge_counts
from actae.domain.validation import MAX_DEPTH

__all__ = ["Found", "redacted_channel_values", "redacted_value", "reporting"]

Found = dict[str, int]  # counts by pattern name (only non-zero ones)

_KEPT = (
    int,
    float,
    decimal.Decimal,
    datetime.date,
    datetime.time,
    datetime.timedelta,
    uuid.UUID,
    enum.Enum,
)
"""Values without free text (``bool`` is an ``int``, a ``datetime`` a ``date``)."""


def redacted_value(value: object, redact: Redactor, where: str) -> tuple[Any, Found]:
    """``value`` with ``redact`` applied to every text it holds, and the counts."""
    walk = _Walk(redact)
    return walk.value(value, where, 0), merge_counts(walk.counts)


def redacted_channel_values(checkpoint: Checkpoint, redact: Redactor) -> tuple[Checkpoint, Found]:
    """``checkpoint`` with its channel values redacted (the rest is ids and versions)."""
    values, found = redacted_value(
        checkpoint["channel_values"], redact, "langgraph.checkpoint.channel_values"
    )
    if values is checkpoint["channel_values"]:
        return checkpoint, found
    return {**checkpoint, "channel_values": values}, found


def reporting(found: Found) -> Redactor | None:
    """A redactor that removes nothing and reports ``found``, for ``store.record(redact=)``."""
    return (lambda document: Redacted(document, dict(found))) if found else None


class _Walk:
    """One value's walk: the redactor, and the counts summed over every part redacted."""

    def __init__(self, redact: Redactor) -> None:
        self.redact = redact
        self.counts: Found = {}

    def value(self, value: object, where: str, depth: int) -> Any:
        """``value`` redacted; the very same object when nothing in it changed."""
        if depth > MAX_DEPTH:
            raise ValidationError(where, f"nests deeper than {MAX_DEPTH} levels")
        if value is None or isinstance(value, _KEPT):
            return value
        if _plain(value, depth):
            return self.plain(value, where)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return self.dataclass(value, where, depth + 1)
        for kind, walk in _WALKS:
            if isinstance(value, kind):
                return walk(self, value, where, depth + 1)
        raise _unredactable(value, where)

    def plain(self, value: object, where: str) -> Any:
        """Plain JSON, redacted whole (so a key named like a secret empties its value)."""
        result = checked(self.redact(value), where=where)
        if not result.counts and result.value == value:
            return value  # the original object: a str subclass stays one
        self.counts = merge_counts(self.counts, result.counts)
        return result.value

    def mapping(self, value: dict[Any, Any], where: str, depth: int) -> dict[Any, Any]:
        """A dict: its plain JSON entries redacted together, the others one by one."""
        plain = {k: v for k, v in value.items() if isinstance(k, str) and _plain(v, depth)}
        cleaned = self.plain(plain, where) if plain else plain
        rest = {
            key: (
                self.value(key, f"{where}.<key>", depth),
                self.value(item, f"{where}.{key}", depth),
            )
            for key, item in value.items()
            if not (isinstance(key, str) and key in plain)
        }
        if cleaned is plain and all(k is n and value[k] is v for k, (n, v) in rest.items()):
            return value
        if list(cleaned) != list(plain):  # a key was redacted: its entry moves, none is lost
            return {**cleaned, **dict(rest.values())}
        return dict(rest[key] if key in rest else (key, cleaned[key]) for key in value)

    def items(self, value: list[Any] | tuple[Any, ...] | set[Any], where: str, depth: int) -> Any:
        """A list, a tuple (a named one too) or a set, item by item."""
        unordered = isinstance(value, set | frozenset)
        items = [
            self.value(item, f"{where}[{'' if unordered else n}]", depth)
            for n, item in enumerate(value)
        ]
        if all(new is old for new, old in zip(items, value, strict=True)):
            return value
        if isinstance(value, list):
            return items
        named = isinstance(value, tuple) and type(value) is not tuple
        return type(value)(*items) if named else type(value)(items)

    def model(self, value: BaseModel, where: str, depth: int) -> BaseModel:
        """A pydantic model (a LangChain message): its fields, and any extra ones."""
        fields = {name: getattr(value, name) for name in type(value).model_fields}
        fields.update(value.model_extra or {})
        changed = self._changed(fields, where, depth)
        return value.model_copy(update=changed) if changed else value

    def dataclass(self, value: Any, where: str, depth: int) -> Any:
        fields = {field.name: getattr(value, field.name) for field in dataclasses.fields(value)}
        changed = self._changed(fields, where, depth)
        if not changed:
            return value
        init = {field.name for field in dataclasses.fields(value) if field.init}
        if not changed.keys() <= init:
            raise _unredactable(value, where, " (a field it is not built with holds a secret)")
        return dataclasses.replace(value, **changed)

    def send(self, value: Send, where: str, depth: int) -> Send:
        arg = self.value(value.arg, f"{where}.arg", depth)
        return value if arg is value.arg else Send(value.node, arg, timeout=value.timeout)

    def exception(self, value: BaseException, where: str, depth: int) -> BaseException:
        """An error a node raised (the ``__error__`` write): its arguments and attributes."""
        args = self.value(value.args, f"{where}.args", depth)
        attributes = self._changed(dict(vars(value)), where, depth)
        if args is value.args and not attributes:
            return value
        cleaned = copy.copy(value)
        cleaned.args = args
        for name, item in attributes.items():
            setattr(cleaned, name, item)
        return cleaned

    def _changed(self, fields: dict[str, Any], where: str, depth: int) -> dict[str, Any]:
        """The fields whose redacted value differs, redacted."""
        out = {}
        for name, item in fields.items():
            new = self.value(item, f"{where}.{name}", depth)
            if new is not item:
                out[name] = new
        return out


def _plain(value: object, depth: int) -> bool:
    """Whether ``value`` is plain JSON a redactor takes as it is (a tuple is not: kept one)."""
    if isinstance(value, str) or value is None or isinstance(value, bool | int):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if depth > MAX_DEPTH:
        return False
    if type(value) is list:
        return all(_plain(item, depth + 1) for item in value)
    if type(value) is dict:
        return all(isinstance(k, str) and _plain(v, depth + 1) for k, v in value.items())
    return False


def _unredactable(value: object, where: str, why: str = "") -> ValidationError:
    kind = type(value)
    return ValidationError(
        where,
        f"holds a {kind.__module__}.{kind.__qualname__}{why}, which the store's redactor "
        "cannot look inside (redact= walks JSON values, dicts, lists, tuples, sets, pydantic "
        "models, dataclasses, Send and exceptions); nothing was written. Keep such values "
        "(bytes, opaque objects) out of the graph's state and writes, or open the store "
        "without redact= (docs/langgraph.md)",
    )


_Walker = Callable[[_Walk, Any, str, int], Any]
_WALKS: tuple[tuple[Any, _Walker], ...] = (
    (dict, _Walk.mapping),
    (list | tuple | set | frozenset, _Walk.items),
    (BaseModel, _Walk.model),
    (Send, _Walk.send),
    (BaseException, _Walk.exception),
)
