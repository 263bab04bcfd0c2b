"""Actae's read models: tables, event-to-change functions and analyst queries; pure."""

if __name__ != "actae.projections":  # pragma: no cover - exercised by a subprocess test
    msg = f"import this package as 'actae.projections', not {__name__!r}"
    raise ImportError(msg)
