"""docs/architecture.md's worked example (a new command in two pieces) runs as written."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"


def test_the_worked_example_adds_a_command_that_runs() -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    assert len(blocks) == 3, "the command, its Store method, and a run of it"
    namespace: dict[str, object] = {"__name__": "architecture_example"}
    for code in blocks:  # one module, read top to bottom
        exec(compile(code, str(DOC), "exec", dont_inherit=True), namespace)  # noqa: S102
    assert "annotate" in namespace
