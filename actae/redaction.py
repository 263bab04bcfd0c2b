"""Redaction before storage: ``actae.open(url, redact=True)`` or a redactor of your own.

``redact_secrets`` removes API keys, bearer tokens, card numbers (Luhn-checked) and e-mail
addresses, and the values of fields named like secrets (``password``, ``api_key``,
``authorization``, ...); ``redactor_from({"name": regex})`` builds one from your patterns;
``chain(a, b)`` runs several. A redactor takes a JSON document and returns
``Redacted(value, counts)``: the events record the counts by pattern name, never the
secrets. See docs/data.md.
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
