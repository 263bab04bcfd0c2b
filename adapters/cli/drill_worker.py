"""The drill's worker processes: ``actae worker`` with the drill's workflows (``ACTAE_DRILL_*``).

Here, so the drill's code does not import the CLI.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from actae.adapters.cli.main import main as cli_main
from actae.adapters.drill.workflows import DrillAgents, Settings


def main(argv: Sequence[str] | None = None) -> int:
    """A drill worker process: ``actae worker`` (its options) with the drill's workflows."""
    agents = DrillAgents(Settings.from_environ(os.environ))
    return cli_main(
        ["worker", *(sys.argv[1:] if argv is None else argv)],
        registry=agents.registry(),
        on_commit=agents.on_commit(),
    )


if __name__ == "__main__":
    raise SystemExit(main())
