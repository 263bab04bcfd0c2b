"""The docs say what the code says: generated blocks fresh, examples that run, links that land.

The README is short and points into ``docs/``; these tests keep the pages it points to
honest. Blocks generated from code (the read models' reference, the analyst queries, the
mutant inventory) must equal what their renderers make today; every Python example of the
pages listed in ``EXAMPLES`` runs as written, twice; and every relative link and ``#anchor``
in the README, ``docs/*.md`` and ``tests/MUTANTS.md`` resolves to a file inside the
repository and a heading in it.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from actae.projections.tables import TABLES, VIEWS
from tests.generated_docs import COMMAND, stale

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", ROOT / "tests" / "MUTANTS.md", *(ROOT / "docs").glob("*.md")])
EXAMPLES = ("docs/workflows.md", "docs/read-models.md", "docs/async.md", "docs/api.md")
"""Pages whose every ```python block runs on its own (``py`` marks a fragment)."""

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~)")


def test_every_generated_block_is_what_its_renderer_makes() -> None:
    assert stale() == [], f"regenerate with {COMMAND}"


def test_the_read_models_page_describes_every_table_view_and_column() -> None:
    text = (ROOT / "docs" / "read-models.md").read_text()
    for table in (*TABLES, *VIEWS):
        assert f"### `{table.name}`" in text
        for column in table.columns:
            assert f"| `{column.name}` | {column.type} |" in text


def python_examples() -> list[tuple[str, int, str]]:
    found = []
    for page in EXAMPLES:
        blocks = re.findall(r"```python\n(.*?)```", (ROOT / page).read_text(), flags=re.DOTALL)
        found += [(page, number, code) for number, code in enumerate(blocks, start=1)]
    return found


@pytest.mark.parametrize(("page", "number", "code"), python_examples())
def test_each_example_runs_and_runs_again(
    page: str, number: int, code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for _ in range(2):  # a reader runs it again: re-running durable code is safe
        exec(compile(code, f"{page} (example {number})", "exec"), {"__name__": "doc"})  # noqa: S102


def prose(text: str) -> str:
    """``text`` without its fenced code blocks, whose brackets and hashes are not Markdown."""
    kept, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.lstrip()):
            fenced = not fenced
        elif not fenced:
            kept.append(line)
    return "\n".join(kept)


def anchors(text: str) -> set[str]:
    """The ``#fragment`` each heading of a page gets, as GitHub makes them."""
    slugs: Counter[str] = Counter()
    found = set()
    for line in prose(text).splitlines():
        heading = re.match(r"#{1,6}\s+(.*?)\s*#*$", line)
        if heading is None:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading.group(1).lower()).replace(" ", "-")
        found.add(slug if slugs[slug] == 0 else f"{slug}-{slugs[slug]}")
        slugs[slug] += 1
    return found


def broken_links(text: str, folder: Path) -> list[str]:
    """The links of a page in ``folder`` whose file or heading does not exist."""
    broken = []
    for target in LINK.findall(prose(text)):
        if re.match(r"[a-z]+:", target):  # https:, mailto: - not ours to check
            continue
        path, _, fragment = target.partition("#")
        linked = (folder / path).resolve()
        if path and (not linked.is_relative_to(ROOT) or not linked.exists()):
            broken.append(f"{target}: no such file in the repository")
            continue
        markdown = not path or linked.suffix == ".md"
        if fragment and markdown and fragment not in anchors(linked.read_text() if path else text):
            broken.append(f"{target}: no heading #{fragment} there")
    return broken


OUTSIDE = "/".join(("..", "shared", ""))
"""The team's own notes beside the repository, which no user of the docs can read."""


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(page: Path) -> None:
    assert broken_links(page.read_text(), page.parent) == []
    assert OUTSIDE not in page.read_text(), "cite nothing outside the repository"


def test_the_link_check_notices_a_missing_file_a_missing_heading_and_a_way_out() -> None:
    text = (
        "# Errors\n\n[a](nowhere.md) [b](api.md#no-such-heading) [c](#errors) [d](#gone)\n"
        "[e](https://example.org) [f](api.md#errors) [g](../../notes/STYLE.md)\n"
        "```sh\n# not a heading [h](nowhere.md)\n```\n"
    )
    assert broken_links(text, ROOT / "docs") == [
        "nowhere.md: no such file in the repository",
        "api.md#no-such-heading: no heading #no-such-heading there",
        "#gone: no heading #gone there",
        "../../notes/STYLE.md: no such file in the repository",
    ]


def test_the_readme_stays_short() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 400
