"""The redaction engine behind the domain's port (``actae.domain.redaction``); no IO.

``actae.redaction`` is its public face (docs/data.md).
"""
