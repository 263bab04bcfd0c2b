"""A unique prefix of a run id or an effect key names it, as a short commit hash does in git.

A run id prefix is a range of ids, which the read model's primary key answers on both
backends; a full id is taken without a lookup, so acting on a run the projector has not
seen yet works. An effect key is looked up in the ledger first; only a key it does not know
is a prefix, found with ``substr`` in a scan of the effects read model: a range would use
the index, but on PostgreSQL it compares by the collation, in which it need not hold exactly
the keys with that prefix. A person types a prefix, rarely: the scan is affordable.
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
    """The run whose id is ``text`` or starts with it (one run, else a clear error)."""
    digits = _hex(require_text("run_id", text))
    if len(digits) == 32:
        return UUID(digits)
    low, high = UUID(digits.ljust(32, "0")), UUID(digits.ljust(32, "f"))
    between = {"run_id >= {p}": low, "run_id <= {p}": high}
    rows = rows_of(store, "run_status", between, "run_id", SHOWN + 1)
    return UUID(_one("run", text, [str(row["run_id"]) for row in rows]))


def resolve_effect(store: Store, text: str) -> str:
    """The effect key that is ``text`` or starts with it (one effect, else a clear error).

    A key the ledger knows is that effect, whether or not the read models have it yet; else
    ``text`` must be a prefix of exactly one key the read models have.
    """
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
