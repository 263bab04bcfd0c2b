"""A unique prefix of a run id or an effect key names it, as a short commit hash does in git.

A run id prefix is a range of ids on run_status's primary key. An effect key prefix is matched
with ``substr`` in a scan: on PostgreSQL a range compares by collation, which need not hold
exactly the keys with that prefix (a person types a prefix rarely: the scan is affordable).
"""

# ruff: noqa: S608 - SQL assembled from our own constant table and column names; values are bound

from __future__ import annotations

import string
from uuid import UUID

from actae.adapters.operate.views import rows_of, select
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
    """The run whose id is ``text`` (taken without a lookup) or the one run starting with it."""
    digits = _hex(require_text("run_id", text))
    if len(digits) == 32:
        return UUID(digits)
    low, high = UUID(digits.ljust(32, "0")), UUID(digits.ljust(32, "f"))
    between = {"run_id >= {p}": low, "run_id <= {p}": high}
    rows = rows_of(store, "run_status", between, "run_id", SHOWN + 1)
    return UUID(_one("run", text, [str(row["run_id"]) for row in rows]))


def resolve_effect(store: Store, text: str) -> str:
    """The effect key that is ``text`` (as the ledger knows it) or the one key starting with it."""
    prefix = require_text("effect_key", text)
    if store.find_effect(prefix) is not None:
        return prefix
    rows = select(
        store,
        "effects",
        lambda p: (
            f"SELECT effect_key FROM effects WHERE substr(effect_key, 1, {p}) = {p} "
            f"ORDER BY effect_key LIMIT {p}"
        ),
        [len(prefix), prefix, SHOWN + 1],
    )
    return _one("effect", text, [str(row["effect_key"]) for row in rows])
