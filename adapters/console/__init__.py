"""``actae console``: the web console and HTTP API over a store (docs/console.md).

Only this room imports the server stack (the extra ``actae[console]``); every read and
action goes through :mod:`actae.adapters.operate`, as the CLI's do.
"""
