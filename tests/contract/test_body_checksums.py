"""Contract: a stored body changed by one byte is refused by every read, on every backend.

Issue 28, item 4: on SQLite one byte flipped inside a recorded step result was served as
the result, and ``PRAGMA integrity_check`` said ``ok``. Every body now carries a checksum
(``adapters/persistence/codec.py``); each read path must raise ``CorruptionError``
naming the channel and cursor (or the aggregate and version) of the row, for channel, run
and operation events, in clear and encrypted stores.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import actae
from actae.domain.operation import Operation
from tests.contract.rows import Row, flip
from tests.custody.sealed import keyring_file

STEP_RESULT = "charged-4242"
RECEIPT = "rcpt-7777"


def written(store: Any) -> actae.RunInfo:
    """A run with a recorded step result (cursor 2) and a completed effect ``pay-1``."""
    run: actae.RunInfo = store.start_run("wf-sum", agent_id="agent", state={"step": 0})
    store.resume(run.run_id, worker="w1").step("charge", lambda: {"result": STEP_RESULT})
    claim = store.claim("pay-1", run_id=run.run_id, worker="w1", lease=30, request={"n": 1})
    store.complete_effect("pay-1", token=claim.token, worker="w1", result={"r": RECEIPT})
    return run


def must_not_run() -> Any:
    pytest.fail("a step whose recorded result is corrupt ran again")


def refused(where: str, read: Any) -> None:
    """``read()`` raises ``CorruptionError`` naming ``where``."""
    with pytest.raises(actae.CorruptionError) as caught:
        read()
    assert where in str(caught.value)


def first_of(subscription: Any) -> Any:
    with subscription as events:
        return next(iter(events))


def every_channel_read_refuses(store: Any, run: actae.RunInfo, row: Row) -> None:
    where = f"channel {run.channel_id} at cursor {row.version}"
    refused(where, lambda: store.events(run.channel_id))
    refused(where, lambda: store.events(None))
    refused(where, lambda: store.recover(run.channel_id))
    refused(where, lambda: store.resume(run.run_id, worker="w2").step("charge", must_not_run))
    refused(where, lambda: first_of(store.subscribe(run.channel_id)))
    refused(where, lambda: first_of(store.subscribe()))
    projector = store.projector()
    projector.catch_up()
    errors = [error["error"] for error in projector.errors()]
    assert any(e.startswith("CorruptionError") and where in e for e in errors), errors


def test_a_flipped_byte_in_a_step_result_is_refused_by_every_read(
    store: Any, store_url: str
) -> None:
    run = written(store)
    row = flip(store, store_url, "Channel.Recorded", STEP_RESULT.encode())
    assert row.version == 2  # the step's result, recorded at cursor 2

    every_channel_read_refuses(store, run, row)


def test_a_flipped_byte_in_a_run_event_is_refused(store: Any, store_url: str) -> None:
    run = written(store)
    row = flip(store, store_url, "Run.Started", b'"wf-sum')

    refused(f"run {run.run_id} at version 1", lambda: store.run(run.run_id))
    assert row.originator_id == run.run_id


def test_a_flipped_byte_in_an_operation_event_is_refused(store: Any, store_url: str) -> None:
    written(store)
    row = flip(store, store_url, "Operation.Completed", RECEIPT.encode())

    where = f"operation {Operation.id_for('pay-1')} at version {row.version}"
    refused(where, lambda: store.effect("pay-1"))


@pytest.fixture
def sealed_store(store_url: str, tmp_path: Path) -> Iterator[actae.Store]:
    with actae.open(store_url, keyring=str(keyring_file(tmp_path))) as store:
        yield store


def test_on_an_encrypted_store_the_clear_metadata_around_sealed_contents_is_checked(
    sealed_store: actae.Store, store_url: str
) -> None:
    """AES-GCM authenticates the sealed contents only: the kind, token and ids are clear."""
    run = written(sealed_store)
    row = flip(sealed_store, store_url, "Channel.Recorded", b'"kind":"step.result')
    every_channel_read_refuses(sealed_store, run, row)

    token = flip(sealed_store, store_url, "Operation.Completed", b'"token":1')
    where = f"operation {Operation.id_for('pay-1')} at version {token.version}"
    refused(where, lambda: sealed_store.effect("pay-1"))
