"""A unique prefix of a run id or an effect key names it, as a short commit hash does in git.

A run id prefix becomes a range of ids (the prefix padded with ``0`` and with ``f``), which
the read model's primary key answers on both backends: uuids order by their bytes on
PostgreSQL and SQLite stores their canonical text, which orders the same way. A full id is
taken as it is, without a lookup, so acting on a run the projector has not seen yet works.

An effect key is looked up in the ledger first (``store.find_effect``, one read by primary
key): a full key names its effect even before the projector has seen it. Only a key the
ledger does not know is taken as a prefix and searched in the effects read model, with
``substr(effect_key, 1, n) = prefix``, a scan of that table. A range (``effect_key >= prefix
AND effect_key < prefix + U+10FFFF``) would use the key's index, but on PostgreSQL text
compares by the database's collation, in which such a range need not hold exactly the
keys that start with the prefix, and ``COLLATE "C"`` has no SQLite spelling: the scan is
right on both. A prefix is typed by a person, rarely, so a scan is affordable.
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
