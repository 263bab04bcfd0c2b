"""docs/telemetry.md documents every span, attribute and instrument name Actae publishes."""

from __future__ import annotations

from pathlib import Path

from actae.adapters.telemetry import names

DOC = (Path(__file__).parents[2] / "docs" / "telemetry.md").read_text()
PUBLISHED = {
    key: value
    for key, value in vars(names).items()
    if key.isupper() and isinstance(value, str) and value.startswith(("actae.", "gen_ai."))
}


def test_every_published_name_is_documented() -> None:
    assert len(PUBLISHED) > 30
    missing = sorted(value for value in PUBLISHED.values() if f"`{value}" not in DOC)
    assert missing == []
