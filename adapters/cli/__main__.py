"""``python -m actae.adapters.cli``: the same as the ``actae`` command."""

from actae.adapters.cli.main import main

raise SystemExit(main())
