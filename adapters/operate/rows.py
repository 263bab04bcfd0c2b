"""Read-model rows as Python values, whichever backend stored them.

PostgreSQL hands back uuids, datetimes and booleans; SQLite stores text and integers. The
operator's views (and the JSON the console serves) must not care, so every row passes
through :func:`typed`, which converts each column by its abstract type in
:mod:`actae.projections.tables`: one place for the conversion, whatever table is read.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any
from uuid import UUID

import orjson

from actae.projections.tables import Table


def _moment(value: Any) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(str(value))


def _document(value: Any) -> Any:
    return orjson.loads(value) if isinstance(value, str | bytes) else value


CONVERT: dict[str, Callable[[Any], Any]] = {
    "uuid": lambda value: value if isinstance(value, UUID) else UUID(str(value)),
    "text": str,
    "int": int,
    "float": float,
    "bool": bool,
    "timestamp": _moment,
    "json": _document,
}
"""How a stored value of each abstract column type becomes a Python value."""


def typed(table: Table, row: dict[str, Any]) -> dict[str, Any]:
    """``row`` of ``table`` with each known column converted (``None`` stays ``None``)."""
    types = {column.name: column.type for column in table.columns}
    return {
        name: value if value is None or name not in types else CONVERT[types[name]](value)
        for name, value in row.items()
    }
