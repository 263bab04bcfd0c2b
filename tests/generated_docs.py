"""The blocks of the docs that are generated from code, and the command that rewrites them.

A block sits between ``<!-- NAME:start -->`` and ``<!-- NAME:end -->`` in a Markdown file;
what is between them is rendered from the one place that holds the facts (the read models'
tables and queries in ``projections/``, the mutants in ``tests/mutant_cases*.py``), never
typed by hand. ``tests/integration/test_docs.py`` fails while any block differs from what
its renderer makes.

Usage: ``.venv/bin/python -m tests.generated_docs --write`` (rewrite the stale blocks), or
without ``--write`` to list them (exit 1 when any is stale).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from actae.projections.reference import analyst_queries, cell, table_reference
from tests.mutant_cases import MUTANTS as STORE_MUTANTS
from tests.mutant_cases_custody import CUSTODY_MUTANTS
from tests.mutant_cases_faults import FAULT_MUTANTS

ROOT = Path(__file__).resolve().parents[1]
COMMAND = ".venv/bin/python -m tests.generated_docs --write"
CASE_FILES = {
    "tests/mutant_cases.py": STORE_MUTANTS,
    "tests/mutant_cases_faults.py": FAULT_MUTANTS,
    "tests/mutant_cases_custody.py": CUSTODY_MUTANTS,
}


def mutant_counts() -> str:
    """How many mutants each case file holds, and how many are known to survive."""
    rows = "".join(
        f"| `{path}` | {len(cases)} | {sum(1 for m in cases if m.survives)} |\n"
        for path, cases in CASE_FILES.items()
    )
    every = [m for cases in CASE_FILES.values() for m in cases]
    total = f"| all | {len(every)} | {sum(1 for m in every if m.survives)} |\n"
    return "| cases | mutants | known to survive |\n|---|---|---|\n" + rows + total


def mutant_list() -> str:
    """Every mutant: its name, the file whose guard it weakens, and why that guard matters."""
    every = [m for cases in CASE_FILES.values() for m in cases]
    per_file = Counter(m.path for m in every)
    files = "".join(f"| `{path}` | {n} |\n" for path, n in sorted(per_file.items()))
    survives = {True: " (survives: explained)", False: ""}
    rows = "".join(
        f"| `{m.name}` | `{m.path}` | {cell(m.why)}{survives[bool(m.survives)]} |\n" for m in every
    )
    return (
        "| guarded file | mutants |\n|---|---|\n"
        + files
        + "\n| mutant | guard in | why it matters |\n|---|---|---|\n"
        + rows
    )


@dataclass(frozen=True)
class Block:
    """A generated block: the file it is in, its marker name and what renders it."""

    path: str
    name: str
    render: Callable[[], str]

    def expected(self, text: str) -> str:
        """``text`` with this block's content replaced by a fresh rendering."""
        start, end = f"<!-- {self.name}:start -->", f"<!-- {self.name}:end -->"
        pattern = f"{re.escape(start)}.*?{re.escape(end)}"
        if len(re.findall(pattern, text, flags=re.S)) != 1:
            raise SystemExit(f"{self.path} must hold one {start} … {end} block")
        fresh = f"{start}\n\n{self.render().strip()}\n\n{end}"
        return re.sub(pattern, lambda _: fresh, text, flags=re.S)


BLOCKS = (
    Block("docs/read-models.md", "tables", table_reference),
    Block("docs/read-models.md", "queries", analyst_queries),
    Block("tests/MUTANTS.md", "mutant-counts", mutant_counts),
    Block("tests/MUTANTS.md", "mutant-list", mutant_list),
)


def stale() -> list[str]:
    """The blocks whose file holds something other than what their renderer makes."""
    found = []
    for block in BLOCKS:
        text = (ROOT / block.path).read_text()
        if block.expected(text) != text:
            found.append(f"{block.path} ({block.name})")
    return found


def write() -> list[str]:
    """Rewrite every stale block; returns what was rewritten."""
    rewritten = stale()
    for block in BLOCKS:
        path = ROOT / block.path
        path.write_text(block.expected(path.read_text()))
    return rewritten


def main() -> int:
    """Check the generated blocks, or rewrite them with ``--write``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the stale blocks")
    args = parser.parse_args()
    if args.write:
        for name in write():
            print(f"rewrote {name}")
        return 0
    found = stale()
    for name in found:
        print(f"stale: {name}; regenerate with {COMMAND}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
