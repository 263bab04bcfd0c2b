"""The README's Python examples run as written; the commands it and the docs name exist."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)


def test_readme_has_an_example() -> None:
    assert python_blocks()


@pytest.mark.parametrize("code", python_blocks())
def test_readme_example_runs_and_runs_again(
    code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A reader runs an example, then runs it again: the second run finds the first one's
    # runs.db and must pass too (durable execution's point is that re-running is safe).
    monkeypatch.chdir(tmp_path)
    for _ in range(2):
        exec(compile(code, str(README), "exec"), {"__name__": "readme"})  # noqa: S102
    assert os.path.exists(tmp_path / "runs.db") == ("sqlite:///runs.db" in code)


def test_every_command_the_readme_and_the_docs_name_exists() -> None:
    from actae.adapters.cli.main import cli

    named: set[str] = set()
    pages = [README, *sorted((README.parent / "docs").glob("*.md"))]
    text = "".join(page.read_text() for page in pages)
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.DOTALL):
        for line in block.splitlines():
            words = line.split("#")[0].split()
            if words[:1] == ["actae"] and len(words) > 1 and not words[1].startswith("-"):
                named.add(words[1])
                while len(words) > 3 and words[2] == "|":  # `actae approve | deny ...`
                    named.add(words[3])
                    words = words[2:]
    assert named - set(cli.commands) == set()
    assert {"runs", "show", "effects", "audit", "approve", "deny", "override"} <= named
