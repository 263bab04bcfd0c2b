"""The read models' reference (docs/read-models.md), rendered from the tables and queries.

``python -m tests.generated_docs --write`` puts it into the page; a test fails while it differs.
"""

from __future__ import annotations

from actae.projections.queries import ANALYST_QUERIES, psql
from actae.projections.tables import TABLES, VIEWS, Column, Table


def cell(text: str) -> str:
    """``text`` as one cell of a Markdown table: a ``|`` in it would end the cell."""
    return text.replace("|", "\\|")


def column_rows(columns: tuple[Column, ...]) -> str:
    """A table's columns as a Markdown table: name, abstract type, meaning."""
    head = "| column | type | meaning |\n|---|---|---|\n"
    return head + "".join(f"| `{c.name}` | {c.type} | {cell(c.doc)} |\n" for c in columns)


def _listed(columns: tuple[str, ...]) -> str:
    return f"`{columns[0]}`" if len(columns) == 1 else f"`({', '.join(columns)})`"


def keys_and_indexes(table: Table) -> str:
    """What a table is keyed and indexed by, in one sentence."""
    indexes = ", ".join(_listed(columns) for columns in table.indexes) or "none"
    return f"Key: {_listed(table.keys)}. Indexes: {indexes}.\n"


def table_reference() -> str:
    """Every read-model table and view: a heading, what a row is, its columns, its keys."""
    tables = [
        f"### `{t.name}`\n\n{t.doc}\n\n{column_rows(t.columns)}\n{keys_and_indexes(t)}"
        for t in TABLES
    ]
    views = [f"### `{v.name}` (view)\n\n{v.doc}\n\n{column_rows(v.columns)}" for v in VIEWS]
    return "\n".join(tables + views)


def analyst_queries() -> str:
    """Each example query's title, then the query as it pastes into psql."""
    return "\n".join(
        f"{title[0].upper()}{title[1:]}:\n\n```sql\n{psql(query)}\n```\n"
        for title, query in ANALYST_QUERIES.items()
    )
