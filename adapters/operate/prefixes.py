"""A unique prefix of a run id or an effect key names it, as a short commit hash does in git.

A run id prefix becomes a range of ids (the prefix padded with ``0`` and with ``f``), which
the read model's primary key answers on both backends: uuids order by their bytes on
PostgreSQL and SQLite stores their canonical text, which orders the same way. A full id is
taken as it is, without a lookup, so acting on a run the projector has not seen yet works.
"""

# ruff: noqa: S608 - SQL assembled from our own constant table and column names; values are bound

from __future__ import annotations

import string
from uuid import UUID

from actae.adapters.operate.views import select
from actae.adapters.runtime.store import Store
from actae.domain.errors import NotFoundError, ValidationError
from actae.domain.validation import require_text

SHOWN = 5
"""Candidates an ambiguous prefix's error names."""


def _hex(text: str) -> str:
    digits = text.replace("-", "").lower()
    if not digits or len(digits) > 32 or any(c not in string.hexdigits for c in digits):
        raise ValidationError(
            "run_id", f"expected a run id or a prefix of one (hex digits), got {text!r}"
        )
    return digits


def _one(what: str, prefix: str, found: list[str]) -> str:
    if not found:
        raise NotFoundError(what, prefix, "no match; `actae runs` lists them")
    if len(found) > 1:
        shown = ", ".join(found[:SHOWN]) + (", ..." if len(found) > SHOWN else "")
        raise ValidationError(
            what.replace(" ", "_"), f"{prefix!r} is ambiguous: it starts {shown}; give more of it"
        )
    return found[0]


def resolve_run(store: Store, text: str) -> UUID:
    """The run whose id is ``text`` or starts with it (one run, else a clear error)."""
    digits = _hex(require_text("run_id", text))
    if len(digits) == 32:
        return UUID(digits)
    low, high = UUID(digits.ljust(32, "0")), UUID(digits.ljust(32, "f"))
    rows = select(
        store,
        "run_status",
        lambda p: (
            f"SELECT run_id FROM run_status WHERE run_id >= {p} AND run_id <= {p} "
            f"ORDER BY run_id LIMIT {p}"
        ),
        [low, high, SHOWN + 1],
    )
    return UUID(_one("run", text, [str(row["run_id"]) for row in rows]))


def resolve_effect(store: Store, text: str) -> str:
    """The effect key that is ``text`` or starts with it (one effect, else a clear error)."""
    prefix = require_text("effect_key", text)
    rows = select(
        store,
        "effects",
        lambda p: (
            f"SELECT effect_key FROM effects WHERE substr(effect_key, 1, {p}) = {p} "
            f"ORDER BY effect_key LIMIT {p}"
        ),
        [len(prefix), prefix, SHOWN + 1],
    )
    keys = [str(row["effect_key"]) for row in rows]
    return prefix if prefix in keys else _one("effect", text, keys)
