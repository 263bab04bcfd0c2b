"""``actae console``: the web console and HTTP API over a store (docs/console.md)."""
