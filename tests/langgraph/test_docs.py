"""docs/langgraph.md's Python examples run as written, in order, and then again."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "langgraph.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL)


def test_the_examples_run_and_run_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The later examples read what the first one left in runs.db; a reader who runs them
    # all a second time finds the first time's threads, and they must pass again.
    assert len(python_blocks()) >= 3
    monkeypatch.chdir(tmp_path)
    for _ in range(2):
        for number, code in enumerate(python_blocks(), start=1):
            where = f"{DOC} (example {number})"
            exec(compile(code, where, "exec"), {"__name__": "langgraph_doc"})  # noqa: S102
    assert (tmp_path / "runs.db").exists()
