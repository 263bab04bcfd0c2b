"""The redaction engine: the built-in secret patterns and the redactors made of them.

The domain knows only the port (``actae.domain.redaction``: a redactor is a callable from a
JSON document to ``Redacted(value, counts)``) and records the counts; how secrets are found
lives here, next to nothing else: it does no IO and is shared by the store, the workers and
the LangGraph saver. ``actae.redaction`` is its public face.
"""
