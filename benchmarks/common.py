"""What every benchmark shares: the database, the results folder, progress and clean-up."""

from __future__ import annotations

from pathlib import Path

import psycopg
from psycopg import sql

DSN = "postgresql://postgres@127.0.0.1:5432/test"
RESULTS = Path(__file__).with_name("results")


def progress(text: str) -> None:
    """One line of progress, so a long run shows where it is."""
    print(f"  … {text}", flush=True)


def with_schema(dsn: str, schema: str) -> str:
    """An Actae store URL for ``schema`` on the server at ``dsn``."""
    return f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}"


def drop_schemas(dsn: str, *schemas: str) -> None:
    """Drop benchmark schemas (and everything in them) if they exist."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for name in schemas:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def schema_bytes(dsn: str, schema: str) -> int:
    """Bytes on disk of every table in ``schema``, with its indexes and TOAST data."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind = 'r'",
            (schema,),
        ).fetchone()
    return int(row[0]) if row else 0
