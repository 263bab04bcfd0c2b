"""Redaction before storage: ``actae.open(url, redact=True)`` or a redactor of your own.

A redactor takes a JSON document and returns ``Redacted(value, counts)``: the events record
the counts by pattern name, never the secrets (docs/data.md).
"""

from actae.adapters.redaction.patterns import PATTERNS, SECRET_KEYS
from actae.adapters.redaction.redactors import (
    builtin_redactor,
    chain,
    redact_secrets,
    redactor_from,
)
from actae.domain.redaction import Redacted, Redactor

__all__ = [
    "PATTERNS",
    "SECRET_KEYS",
    "Redacted",
    "Redactor",
    "builtin_redactor",
    "chain",
    "redact_secrets",
    "redactor_from",
]
