"""Encryption at rest: contents sealed under each run's data key, metadata in clear.

Every backend holds the agent's contents (states, payloads, step and effect results, run
results) only as ciphertext; the store opened with its keyring reads them back unchanged;
without the keyring it still reads the structure. A ciphertext moved to another row does
not open, and rotation re-wraps data keys without touching a single event.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson
import psycopg
import pytest
from psycopg import sql

import actae
from actae.adapters.custody.keyring import load_keyring, save_keyring
from actae.adapters.persistence.codec import stamped
from tests.custody.sealed import (
    MARKER,
    base_dsn,
    contains_marker,
    every_table_text,
    keyring_file,
    raw_event_bodies,
    schema_of,
    with_option,
    write_marker_run,
)


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    """A keyring file."""
    return keyring_file(tmp_path)


def test_contents_read_back_unchanged_with_the_keyring(store_url: str, keys: Path) -> None:
    with actae.open(with_option(store_url, "keyring", str(keys))) as store:
        written = write_marker_run(store)
        run = written.run
        assert store.state_at(run.channel_id).state == {"secret": MARKER, "n": 1}
        assert store.state_at(run.channel_id, 1).state == {"secret": MARKER, "n": 0}
        payloads = [event.payload for event in store.events(run.channel_id)]
        assert {"answer": f"the model said {MARKER}"} in payloads
        assert run.result == {"summary": MARKER}
        assert store.effect(written.effect_key).result == {"receipt": MARKER}
        assert store.recover(run.channel_id).state.state["secret"] == MARKER
        assert run.usage["input_tokens"] == 10  # metadata, in clear


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_no_stored_event_holds_the_contents_in_clear(
    backend: str, tmp_path: Path, keys: Path, request: pytest.FixtureRequest
) -> None:
    if backend == "sqlite":
        url, schema = f"sqlite:///{tmp_path / 'store.db'}", None
    else:
        url = request.getfixturevalue("pg_url")
        schema = schema_of(url)
    with actae.open(url, keyring=str(keys)) as store:
        write_marker_run(store)
    bodies = raw_event_bodies(url, schema)
    assert bodies
    assert not any(MARKER.encode() in body for body in bodies)
    kinds = {orjson.loads(body).get("kind") for body in bodies}
    assert {"run.started", "step.result", "state.changed"} <= kinds  # metadata stays in clear
    assert any(b'"$sealed"' in body for body in bodies)


@pytest.mark.postgres
def test_no_table_of_the_schema_holds_the_plaintext(pg_url: str, keys: Path) -> None:
    """Events, keys, artifacts, read models, bookkeeping: the marker is nowhere in clear."""
    url = with_option(pg_url, "inline_max", "1024")  # the big state becomes an artifact
    with actae.open(url, keyring=str(keys)) as store:
        written = write_marker_run(store, complete=False)
        big = {"secret": MARKER, "pad": "x" * 4096}
        store.transition(
            written.run.channel_id,
            kind="state.grew",
            payload={},
            state=big,
            expected_version=2,
            expected_cursor=store.head(written.run.channel_id).cursor,
        )
        store.fail_run(written.run.run_id, f"tool said {MARKER}", actor="worker")
        store.projector().catch_up()
        assert store.state_at(written.run.channel_id).state == big
    tables = every_table_text(url)
    assert {"actae_events", "run_status", "effects", "audit", "actae_data_keys"} <= set(tables)
    assert [name for name, text in tables.items() if contains_marker(text)] == []
    assert "failed" in tables["run_status"]


def test_without_the_keyring_the_structure_reads_and_the_contents_do_not(
    durable_url: str, keys: Path
) -> None:
    with actae.open(durable_url, keyring=str(keys)) as store:
        written = write_marker_run(store)
    with actae.open(durable_url) as store:
        run = store.run(written.run.run_id)
        assert run.status is actae.RunStatus.COMPLETED
        assert run.result is None
        assert run.cursor == written.run.cursor
        events = store.events(run.channel_id)
        assert [e.kind for e in events][:2] == ["run.started", "step.result"]
        assert all(e.payload is None and not e.forgotten for e in events)
        with pytest.raises(actae.KeyringError):
            store.state_at(run.channel_id)
        with pytest.raises(actae.KeyringError):
            events[1].contents()
        with pytest.raises(actae.KeyringError):  # nothing is added in clear to a sealed run
            store.record(run.channel_id, kind="note", payload={}, expected_cursor=run.cursor)
        clear = store.start_run("wf-clear", agent_id="agent", state={"a": 1})
        assert store.state_at(clear.channel_id).state == {"a": 1}


def test_a_ciphertext_moved_to_another_row_does_not_open(tmp_path: Path, keys: Path) -> None:
    """With the body's checksum made to match, the associated data still tells a moved payload."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with actae.open(url, keyring=str(keys)) as store:
        run = store.start_run("wf", agent_id="a", state={"secret": MARKER})
        for cursor, pay in ((1, "pay alice 10"), (2, "pay mallory 9000")):
            store.record(run.channel_id, kind="order", payload={"do": pay}, expected_cursor=cursor)
    with sqlite3.connect(tmp_path / "store.db") as db:
        rows = db.execute(
            "SELECT originator_version, state FROM stored_events WHERE originator_id = ? "
            "ORDER BY originator_version",
            (run.channel_id.hex,),
        ).fetchall()
        assert len(rows) == 3
        second = orjson.loads(rows[1][1])
        third = orjson.loads(rows[2][1])
        second["$sealed"] = third["$sealed"]  # cursor 3's order at cursor 2
        del second["$checksum"]  # and a body checksum made to match: AES-GCM must refuse it
        topic = "Channel.Recorded"
        moved = stamped(topic, run.channel_id, 2, orjson.dumps(second))
        db.execute(
            "UPDATE stored_events SET state = ? WHERE originator_id = ? AND originator_version = 2",
            (moved, run.channel_id.hex),
        )
    with actae.open(url, keyring=str(keys)) as store:
        assert store.events(run.channel_id, after=2)[0].payload == {"do": "pay mallory 9000"}
        with pytest.raises(actae.CorruptionError, match="sealed contents do not open"):
            store.events(run.channel_id)


def test_another_keyring_cannot_open_the_data_keys(durable_url: str, tmp_path: Path) -> None:
    first = keyring_file(tmp_path, "first.json")
    other = keyring_file(tmp_path, "other.json")
    with actae.open(durable_url, keyring=str(first)) as store:
        written = write_marker_run(store)
    with actae.open(durable_url, keyring=str(other)) as store:
        assert store.run(written.run.run_id).result is None
        with pytest.raises(actae.KeyringError, match="keyring that wrapped"):
            store.state_at(written.run.channel_id)


def test_rotation_rewraps_every_data_key_and_leaves_every_event_alone(
    durable_url: str, keys: Path
) -> None:
    with actae.open(durable_url, keyring=str(keys)) as store:
        runs = [write_marker_run(store) for _ in range(3)]
    schema = schema_of(durable_url) if durable_url.startswith("postgres") else None
    before = sorted(raw_event_bodies(durable_url, schema))
    old = load_keyring(keys)
    rotated = old.with_new_key()
    save_keyring(rotated, keys, replace=True)
    with actae.open(durable_url, keyring=str(keys)) as store:
        assert store.rotate_keys() == 3
        assert store.rotate_keys() == 0  # nothing left under the old key
    assert sorted(raw_event_bodies(durable_url, schema)) == before
    assert _master_keys(durable_url) == {rotated.current}
    # the old master key is no longer needed to read anything
    only_new = type(rotated)(
        current=rotated.current,
        secrets={rotated.current: rotated.secrets[rotated.current]},
        created={},
    )
    save_keyring(only_new, keys, replace=True)
    with actae.open(durable_url, keyring=str(keys)) as store:
        for written in runs:
            assert store.state_at(written.run.channel_id).state["secret"] == MARKER


def _master_keys(url: str) -> set[str]:
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
            return {row[0] for row in db.execute("SELECT master_key FROM actae_data_keys")}
    with psycopg.connect(base_dsn(url)) as conn:
        query = sql.SQL("SELECT master_key FROM {}.actae_data_keys").format(
            sql.Identifier(schema_of(url))
        )
        return {row[0] for row in conn.execute(query)}


def test_a_store_without_a_keyring_writes_in_clear_as_before(store_url: str) -> None:
    with actae.open(store_url) as store:
        run = store.start_run("wf", agent_id="a", state={"secret": MARKER})
        assert store.state_at(run.channel_id).state == {"secret": MARKER}
    if store_url.startswith("sqlite"):
        assert any(MARKER.encode() in body for body in raw_event_bodies(store_url))


def test_a_bad_keyring_is_refused_before_anything_opens(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    (tmp_path / "bad.json").write_text('{"format": "something else"}')
    with pytest.raises(actae.ValidationError, match="not a keyring"):
        actae.open(url, keyring=str(tmp_path / "bad.json"))
    with pytest.raises(actae.ValidationError, match="no keyring file"):
        actae.open(with_option(url, "keyring", str(tmp_path / "missing.json")))
    assert not (tmp_path / "store.db").exists()


def _count(url: str, table: str) -> int:
    """Rows of ``table`` in the store's database (``events``: its events table)."""
    if url.startswith("sqlite"):
        table = "stored_events" if table == "events" else table
        with sqlite3.connect(url.removeprefix("sqlite:///").split("?")[0]) as db:
            return int(db.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    with psycopg.connect(base_dsn(url)) as conn:
        query = sql.SQL("SELECT count(*) FROM {}.{}").format(
            sql.Identifier(schema_of(url)), sql.Identifier(table.replace("events", "actae_events"))
        )
        row = conn.execute(query).fetchone()
        assert row is not None
        return int(row[0])


def test_the_database_refuses_clear_contents_for_a_run_keyed_since_the_store_opened(
    durable_url: str, keys: Path
) -> None:
    """A store opened without the keyring before the first key believes the store never
    encrypted: the insert refuses its clear contents for the run all the same, and the
    blob of a large document or an artifact is refused before anything is stored."""
    url = with_option(durable_url, "inline_max", "1024")
    with actae.open(url) as clear_store:  # no key yet: it believes "never encrypted"
        with actae.open(url, keyring=str(keys)) as sealed_store:
            run = sealed_store.start_run("wf", agent_id="a", state={"n": 0})
        before = clear_store.events(run.channel_id)
        rows, blobs = _count(url, "events"), _count(url, "actae_artifacts")
        with pytest.raises(actae.KeyringError, match=f"run {run.run_id}'s contents"):
            clear_store.record(
                run.channel_id, kind="note", payload={"a": MARKER}, expected_cursor=1
            )
        with pytest.raises(actae.KeyringError, match=f"run {run.run_id}'s contents"):
            clear_store.record(
                run.channel_id, kind="note", payload={"a": {"big": MARKER * 200}}, expected_cursor=1
            )
        with pytest.raises(actae.KeyringError, match=f"run {run.run_id}'s contents"):
            clear_store.put_artifact(run.run_id, MARKER.encode())
        assert clear_store.events(run.channel_id) == before
        assert (_count(url, "events"), _count(url, "actae_artifacts")) == (rows, blobs)
        clear = clear_store.start_run("wf-clear", agent_id="a", state={"a": 1})
        clear_store.record(clear.channel_id, kind="note", payload={"a": 1}, expected_cursor=1)
