"""The read-model columns are written as text: a line that is not a column fails the import."""

from __future__ import annotations

import pytest

from actae.projections.tables import TABLES, columns


def test_a_continuation_goes_on_the_meaning() -> None:
    (column,) = columns("""
    status text: running | waiting |
        completed
    """)
    assert (column.name, column.type, column.doc) == (
        "status",
        "text",
        "running | waiting | completed",
    )


@pytest.mark.parametrize(
    "text",
    [
        "status tex: an unknown type",
        "status text without a colon",
        "2status text: no identifier",
        "status text: once\nstatus int: twice",
        "status text: ",
    ],
)
def test_a_line_that_is_not_a_new_column_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="expected 'name type: meaning'"):
        columns(text)


def test_the_tables_parse() -> None:
    assert all(table.columns for table in TABLES)
