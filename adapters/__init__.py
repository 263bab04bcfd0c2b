"""Actae's adapters: encoding, persistence wiring, the public store facade and the CLI."""

if __name__ != "actae.adapters":  # pragma: no cover - exercised by a subprocess test
    msg = f"import this package as 'actae.adapters', not {__name__!r}"
    raise ImportError(msg)
