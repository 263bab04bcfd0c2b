"""Helpers for the encryption tests: keyrings, encrypted store URLs, raw rows, a marker run."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
from psycopg import sql

import actae
from actae.adapters.custody.keyring import new_keyring, save_keyring

MARKER = "zebra-violet-7731"
"""A string the agent writes everywhere; it must never be found at rest in clear."""


def keyring_file(folder: Path, name: str = "keys.json") -> Path:
    """A fresh keyring written to ``folder``."""
    path = folder / name
    save_keyring(new_keyring(), path, replace=False)
    return path


def with_option(url: str, name: str, value: str) -> str:
    """``url`` with ``?name=value`` (or ``&``) appended."""
    return f"{url}{'&' if '?' in url else '?'}{name}={value}"


@dataclass
class Written:
    """What :func:`write_marker_run` left in the store."""

    run: actae.RunInfo
    effect_key: str


def write_marker_run(store: actae.Store, *, complete: bool = True) -> Written:
    """A run whose state, payloads, step and effect results all carry :data:`MARKER`."""
    run = store.start_run("wf-" + MARKER[:5], agent_id="agent", state={"secret": MARKER, "n": 0})
    store.record(
        run.channel_id,
        kind="step.result",
        payload={"answer": f"the model said {MARKER}"},
        expected_cursor=1,
        usage={"input_tokens": 10, "cost": 0.5},
    )
    store.transition(
        run.channel_id,
        kind="state.changed",
        payload={"why": MARKER},
        state={"secret": MARKER, "n": 1},
        expected_version=1,
        expected_cursor=2,
    )
    key = f"charge-{run.run_id}"
    claim = store.claim(key, run_id=run.run_id, worker="w1", lease=30, request={"to": MARKER})
    store.complete_effect(key, token=claim.token, worker="w1", result={"receipt": MARKER})
    if complete:
        store.complete_run(run.run_id, {"summary": MARKER})
    return Written(run=store.run(run.run_id), effect_key=key)


def raw_event_bodies(url: str, schema: str | None = None) -> list[bytes]:
    """Every stored event body, as the database holds it."""
    if url.startswith("sqlite"):
        path = url.removeprefix("sqlite:///").split("?")[0]
        with sqlite3.connect(path) as db:
            return [bytes(row[0]) for row in db.execute("SELECT state FROM stored_events")]
    assert schema is not None
    with psycopg.connect(base_dsn(url)) as conn:
        query = sql.SQL("SELECT state FROM {}.actae_events").format(sql.Identifier(schema))
        return [bytes(row[0]) for row in conn.execute(query)]


def base_dsn(url: str) -> str:
    """A store URL without its query: what psycopg connects to."""
    return url.split("?", maxsplit=1)[0]


def schema_of(url: str) -> str:
    """The ``schema`` option of a PostgreSQL store URL."""
    query = url.split("?", 1)[1]
    return dict(part.split("=", 1) for part in query.split("&"))["schema"]


def every_table_text(url: str) -> dict[str, str]:
    """The text form of every row of every table in the store's PostgreSQL schema."""
    schema = schema_of(url)
    found: dict[str, str] = {}
    with psycopg.connect(base_dsn(url)) as conn:
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
            (schema,),
        ).fetchall()
        for (table,) in tables:
            query = sql.SQL("SELECT t::text FROM {}.{} t").format(
                sql.Identifier(schema), sql.Identifier(table)
            )
            rows: list[Any] = conn.execute(query).fetchall()
            found[table] = "\n".join(row[0] for row in rows)
            # bytea columns print as hex: look for the marker's hex form as well
    return found


def contains_marker(text: str) -> bool:
    """Whether ``text`` holds the marker, as text or as the hex of its bytes."""
    return MARKER in text or MARKER.encode().hex() in text


def run_uuid(value: UUID | str) -> UUID:
    """``value`` as a UUID."""
    return value if isinstance(value, UUID) else UUID(value)
