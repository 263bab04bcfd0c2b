"""Actae's read models (run status, lineage, effects, audit, usage), built asynchronously.

Pure: table descriptions (``tables``), functions from domain events to changes
(``project``) and example analyst queries (``queries``). Adapters apply the changes to
PostgreSQL or SQLite, exactly once, together with the tracking position.
"""

if __name__ != "actae.projections":  # pragma: no cover - exercised by a subprocess test
    msg = f"import this package as 'actae.projections', not {__name__!r}"
    raise ImportError(msg)
