"""Actae's read models (run status, lineage, outstanding effects), built asynchronously.

The projections arrive with the read-model issue; until then lineage is answered from the
event store directly by ``actae.domain.reader``.
"""

if __name__ != "actae.projections":  # pragma: no cover - exercised by a subprocess test
    msg = f"import this package as 'actae.projections', not {__name__!r}"
    raise ImportError(msg)
