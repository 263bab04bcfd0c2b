"""Stable type names: what a stored row calls its event's and aggregate's class.

Each class declares its name (``class Started(..., type_name="Run.Started")``), never a module path,
so files move freely and nothing is imported for a name; a bad or repeated name fails the import.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

AGGREGATE_NAME = re.compile(r"[A-Z][A-Za-z]*")
"""An aggregate's name: one capitalised word, as the class is called (``Run``)."""
BASES = ("Event", "Created")
"""eventsourcing's base event classes, copied into every aggregate and never stored."""

_CLASSES: dict[str, type] = {}


def declare(aggregate: type, events: Iterable[tuple[str, type]]) -> str:
    """Register ``aggregate`` and its ``events`` (all checked first), or ``TypeError``; the name."""
    name = aggregate.__dict__.get("type_name")
    if not isinstance(name, str) or AGGREGATE_NAME.fullmatch(name) is None:
        raise TypeError(
            f"{_where(aggregate)} must declare its stable type name, one capitalised word "
            f"(type_name = {aggregate.__name__!r}), not {name!r}: stored rows name it by it"
        )
    declared = {name: aggregate}
    for attribute, cls in events:
        if attribute in BASES:
            continue
        event_name = getattr(cls, "type_name", None)
        if not isinstance(event_name, str) or not _names_an_event_of(event_name, name):
            raise TypeError(
                f"{_where(cls)} must declare its stable type name, '{name}.' and a "
                f"capitalised word (type_name = '{name}.{attribute}'), not {event_name!r}"
            )
        declared[event_name] = _unique(event_name, cls, declared)
    for declared_name, cls in declared.items():
        _unique(declared_name, cls, _CLASSES)
    _CLASSES.update(declared)
    return name


def class_named(name: str) -> type | None:
    """The class stored rows call ``name``; ``None`` for a name no Actae class declares."""
    return _CLASSES.get(name)


def declared_names() -> Mapping[str, type]:
    """Every name declared so far, with its class."""
    return dict(_CLASSES)


def _names_an_event_of(name: str, aggregate: str) -> bool:
    prefix, dot, event = name.partition(".")
    return prefix == aggregate and dot == "." and AGGREGATE_NAME.fullmatch(event) is not None


def _unique(name: str, cls: type, known: Mapping[str, type]) -> type:
    other = known.get(name)
    if other is not None and other is not cls:
        raise TypeError(
            f"{_where(cls)} declares the type name {name!r} of {_where(other)}: a stored "
            "row names one class; choose another name"
        )
    return cls


def _where(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"
