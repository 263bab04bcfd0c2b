"""The read models take a channel event's head alone only where its contents are in clear.

``SealingMapper.reads_heads``: in a store that ever encrypted, or for a body with sealed
or offloaded contents, the projector decodes the whole event, so a withheld event projects
as it always did and clear contents in an encrypted run are still refused.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import orjson
import pytest

import actae
from actae.adapters.custody.sealing import OFFLOADED, SEALED, SealingMapper
from actae.adapters.persistence.codec import stamped, verified
from actae.domain.channel import Channel
from actae.projections.heads import ChannelEventHead
from tests.custody.sealed import keyring_file, with_option


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    """A keyring file."""
    return keyring_file(tmp_path)


def stored_channel_events(store: actae.Store, channel_id: Any) -> list[Any]:
    """The channel's rows, as the projector reads them."""
    return list(store._service.recorder.select_events(channel_id))


def read_mapper(store: actae.Store) -> SealingMapper:
    """The mapper the store's projector decodes with."""
    mapper = store._service.metadata_mapper
    assert isinstance(mapper, SealingMapper)
    return mapper


def test_clear_contents_in_an_encrypted_run_are_a_poison_event(tmp_path: Path, keys: Path) -> None:
    """A body checksummed anew with its payload in clear: refused as every reader refuses it."""
    path = tmp_path / "store.db"
    url = f"sqlite:///{path}"
    with actae.open(url, keyring=str(keys)) as store:
        run = store.start_run("wf", agent_id="a", state={"n": 0})
        store.record(run.channel_id, kind="k", payload={"a": 1}, expected_cursor=1)
    with sqlite3.connect(path) as db:
        (body,) = db.execute(
            "SELECT state FROM stored_events WHERE originator_id = ? AND originator_version = 2",
            (run.channel_id.hex,),
        ).fetchone()
        fields = orjson.loads(body)
        del fields[SEALED], fields["$checksum"]
        fields["payload"] = {"a": 1}
        clear = stamped("Channel.Recorded", run.channel_id, 2, orjson.dumps(fields))
        db.execute(
            "UPDATE stored_events SET state = ? WHERE originator_id = ? AND originator_version = 2",
            (clear, run.channel_id.hex),
        )
    with actae.open(url) as store:
        projector = store.projector()
        projector.catch_up()

        (error,) = projector.errors()
    assert error["topic"] == "Channel.Recorded"
    assert f"contents in clear in run {run.run_id}, which is encrypted" in error["error"]


def test_a_sealed_body_is_read_whole_by_a_store_that_saw_no_key_yet(
    durable_url: str, keys: Path
) -> None:
    """Opened before the first key, a store believes it never encrypted: the member tells."""
    with actae.open(durable_url) as clear_store:
        with actae.open(durable_url, keyring=str(keys)) as sealed_store:
            run = sealed_store.start_run("wf", agent_id="a", state={"n": 0})
        mapper = read_mapper(clear_store)
        assert not mapper.keys.ever_encrypted()
        (stored,) = stored_channel_events(clear_store, run.channel_id)
        assert SEALED in orjson.loads(verified(stored))

        event = mapper.to_read_event(stored)

    assert isinstance(event, Channel.Opened)
    assert type(event).withheld == "locked"


def test_an_offloaded_body_is_read_whole(durable_url: str) -> None:
    url = with_option(durable_url, "inline_max", "1024")
    with actae.open(url) as store:
        run = store.start_run("wf", agent_id="a", state={"n": 0})
        store.record(run.channel_id, kind="k", payload={"big": "x" * 4096}, expected_cursor=1)
        small, large = stored_channel_events(store, run.channel_id)
        assert OFFLOADED in orjson.loads(verified(large))
        mapper = read_mapper(store)

        assert isinstance(mapper.to_read_event(small), ChannelEventHead)
        event = mapper.to_read_event(large)

    assert type(event) is Channel.Recorded
