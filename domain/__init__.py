"""Actae's domain model: runs, channels and operations as event-sourced aggregates; no IO."""

if __name__ != "actae.domain":  # pragma: no cover - exercised by a subprocess test
    msg = (
        f"import this package as 'actae.domain', not {__name__!r}: a second copy of a module "
        "would make a second class of each error and event, which except clauses and "
        "isinstance would not recognise"
    )
    raise ImportError(msg)
