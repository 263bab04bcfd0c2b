"""Contract: text, numbers and documents that some backend or read model cannot hold are
refused at the call with ``ValidationError`` naming the field, and nothing is written.

Each class of hostile input (NUL characters, lone surrogates, integers beyond signed 64 bits,
documents nested deeper than ``MAX_DEPTH``) is tried at every public entry point that takes
such a value, on every backend; the values just inside the limits are accepted and read back
as written, and the read models take them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest

import actae
from actae.domain.validation import MAX_DEPTH, key_label

Call = tuple[str, Callable[[], object]]
BIG = 2**63
"""One more than the largest signed 64-bit integer."""
HOSTILE_TEXT = {"nul": "a\x00b", "lone surrogate": "a\ud800b"}


def global_position(store: actae.Store) -> int | None:
    """The newest stored event's position (of any aggregate), to prove nothing was written."""
    position: int | None = store._service.recorder.max_notification_id()
    return position


def nested(depth: int) -> dict[str, Any]:
    """A document of exactly ``depth`` levels: {"a": {"a": ... {} ...}}."""
    return functools.reduce(lambda inner, _: {"a": inner}, range(depth - 1), {})


@pytest.fixture
def run(store: actae.Store) -> actae.RunInfo:
    return store.start_run("wf", agent_id="a", state={"n": 0}, operation_id="start:wf")


@pytest.fixture
def token(store: actae.Store, run: actae.RunInfo) -> int:
    """The fencing token of a granted claim on the effect ``"fx"``, held by ``"w"``."""
    return store.claim("fx", run_id=run.run_id, worker="w", lease=30.0).token


def text_calls(store: actae.Store, run: actae.RunInfo, token: int, bad: str) -> list[Call]:
    """Every public call, each with ``bad`` in one of its text fields."""
    rid, cid = run.run_id, run.channel_id
    rec: dict[str, Any] = {"kind": "k", "payload": {}, "expected_cursor": 1}
    tr: dict[str, Any] = {**rec, "state": {}, "expected_version": 1}
    start: dict[str, Any] = {"agent_id": "a", "state": {}}
    return [
        ("workflow_id", lambda: store.start_run(bad, **start)),
        ("agent_id", lambda: store.start_run("wf2", **{**start, "agent_id": bad})),
        ("operation_id", lambda: store.start_run("wf2", **start, operation_id=bad)),
        ("pins.model", lambda: store.start_run("wf2", **start, pins={"model": bad})),
        ("pins.prompt", lambda: store.start_run("wf2", **start, pins={"prompt": bad})),
        ("pins.tools", lambda: store.start_run("wf2", **start, pins={"tools": bad})),
        (f"budget.{key_label(bad)}", lambda: store.start_run("wf2", **start, budget={bad: 1})),
        ("kind", lambda: store.record(cid, **{**rec, "kind": bad})),
        ("operation_id", lambda: store.record(cid, **rec, operation_id=bad)),
        (f"usage.{key_label(bad)}", lambda: store.record(cid, **rec, usage={bad: 1.0})),
        ("kind", lambda: store.transition(cid, **{**tr, "kind": bad})),
        ("operation_id", lambda: store.transition(cid, **tr, operation_id=bad)),
        ("operation_id", lambda: store.fork(cid, at=1, operation_id=bad)),
        ("reason", lambda: store.fork(cid, at=1, reason=bad)),
        ("pins.model", lambda: store.fork(cid, at=1, pins={"model": bad})),
        ("operation_id", lambda: store.operation(bad)),
        ("effect_key", lambda: store.claim(bad, run_id=rid, worker="w", lease=30.0)),
        ("worker", lambda: store.claim("fy", run_id=rid, worker=bad, lease=30.0)),
        ("worker", lambda: store.heartbeat("fx", token=token, worker=bad, lease=30.0)),
        ("worker", lambda: store.complete_effect("fx", token=token, worker=bad, result={})),
        ("effect_key", lambda: store.complete_effect(bad, token=token, worker="w", result={})),
        ("error", lambda: store.fail_effect("fx", token=token, worker="w", error=bad)),
        ("worker", lambda: store.fail_effect("fx", token=token, worker=bad, error="e")),
        (
            "retry_after",
            lambda: store.fail_effect("fx", token=token, worker="w", error="e", retry_after=bad),
        ),
        ("actor", lambda: store.reconcile("fx", "failed", actor=bad)),
        ("actor", lambda: store.abandon("fx", actor=bad, reason="r")),
        ("reason", lambda: store.abandon("fx", actor="op", reason=bad)),
        ("reason", lambda: store.override("fx", "failed", actor="op", reason=bad)),
        ("effect_key", lambda: store.effect(bad)),
        ("name", lambda: store.approve(rid, bad, actor="op")),
        ("actor", lambda: store.approve(rid, "ok", actor=bad)),
        ("note", lambda: store.deny(rid, "ok", actor="op", note=bad)),
        ("name", lambda: store.signal(rid, bad)),
        ("actor", lambda: store.signal(rid, "go", actor=bad)),
        ("name", lambda: store.suspend(rid, reason="signal", name=bad)),
        ("actor", lambda: store.pause(rid, actor=bad, reason="r")),
        ("reason", lambda: store.pause(rid, actor="op", reason=bad)),
        ("reason", lambda: store.unpause(rid, actor="op", reason=bad)),
        ("reason", lambda: store.retry_run(rid, actor="op", reason=bad)),
        ("reason", lambda: store.cancel(rid, actor="op", reason=bad)),
        ("error", lambda: store.fail_run(rid, bad, actor="op")),
        ("actor", lambda: store.fail_run(rid, "e", actor=bad)),
        ("worker", lambda: store.resume(rid, worker=bad)),
        ("pins.model", lambda: store.resume(rid, worker="w", pins={"model": bad})),
        ("name", lambda: actae.Worker(store, name=bad)),
        ("name", lambda: actae.Registry().workflow(bad)),
    ]


def document_calls(
    store: actae.Store, run: actae.RunInfo, token: int, doc: dict[str, Any]
) -> list[Call]:
    """Every public call that takes a JSON document, each given ``doc``."""
    rid, cid = run.run_id, run.channel_id
    rec: dict[str, Any] = {"kind": "k", "payload": {}, "expected_cursor": 1}
    tr: dict[str, Any] = {**rec, "state": {}, "expected_version": 1}
    return [
        ("state", lambda: store.start_run("wf2", agent_id="a", state=doc)),
        ("payload", lambda: store.record(cid, **{**rec, "payload": doc})),
        ("payload", lambda: store.transition(cid, **{**tr, "payload": doc})),
        ("state", lambda: store.transition(cid, **{**tr, "state": doc})),
        ("request", lambda: store.claim("fy", run_id=rid, worker="w", lease=30.0, request=doc)),
        ("result", lambda: store.complete_effect("fx", token=token, worker="w", result=doc)),
        ("evidence", lambda: store.reconcile("fx", "failed", actor="op", evidence=doc)),
        ("result", lambda: store.reconcile("fx", "completed", actor="op", result=doc)),
        ("evidence", lambda: store.override("fx", "failed", actor="op", reason="r", evidence=doc)),
        ("result", lambda: store.override("fx", "completed", actor="op", reason="r", result=doc)),
        ("payload", lambda: store.signal(rid, "go", doc)),
        ("result", lambda: store.complete_run(rid, doc)),
    ]


def assert_all_refused(store: actae.Store, run: actae.RunInfo, calls: list[Call]) -> None:
    """Each call raises ValidationError naming its field, and the store is unchanged."""
    before = (global_position(store), store.events(run.channel_id), store.effect("fx"))
    for field, call in calls:
        with pytest.raises(actae.ValidationError) as caught:
            call()
        assert caught.value.field == field, (field, caught.value)
        assert field in str(caught.value)
    assert (global_position(store), store.events(run.channel_id), store.effect("fx")) == before


@pytest.mark.parametrize("bad", HOSTILE_TEXT.values(), ids=HOSTILE_TEXT.keys())
def test_text_fields_refuse_nul_and_lone_surrogates(
    store: actae.Store, run: actae.RunInfo, token: int, bad: str
) -> None:
    assert_all_refused(store, run, text_calls(store, run, token, bad))


@pytest.mark.parametrize("bad", HOSTILE_TEXT.values(), ids=HOSTILE_TEXT.keys())
def test_run_context_names_refuse_nul_and_lone_surrogates(
    store: actae.Store, run: actae.RunInfo, bad: str
) -> None:
    """A name becomes part of an operation id: refused before anything runs or is written
    (a step's refusal must not pass for a result that cannot be recorded, failing the run)."""
    ctx = store.resume(run.run_id, worker="w")
    calls: list[Call] = [
        ("name", lambda: ctx.step(bad, lambda: 1)),
        ("name", lambda: ctx.effect(bad, lambda key, token: 1)),
        ("kind", lambda: ctx.record(bad, {})),
        ("kind", lambda: ctx.transition(kind=bad, state={})),
        ("name", lambda: ctx.wait_for_signal(bad)),
        ("name", lambda: ctx.wait_for_approval(bad)),
    ]
    store.claim("fx", run_id=run.run_id, worker="w", lease=30.0)  # what assert_all_refused reads
    assert_all_refused(store, run, calls)
    assert store.run(run.run_id).status == actae.RunStatus.RUNNING


@pytest.mark.parametrize("bad", HOSTILE_TEXT.values(), ids=HOSTILE_TEXT.keys())
@pytest.mark.parametrize("where", ["value", "key"])
def test_json_documents_refuse_nul_and_lone_surrogates_in_strings_and_keys(
    store: actae.Store, run: actae.RunInfo, token: int, bad: str, where: str
) -> None:
    inner = {"text": bad} if where == "value" else {bad: 1}
    doc = {"outer": [1, {"inner": inner}]}
    assert_all_refused(store, run, document_calls(store, run, token, doc))


@pytest.mark.parametrize("number", [BIG, -BIG - 1, 2**64, 2**64 - 1, 10**400])
def test_json_documents_refuse_integers_beyond_signed_64_bits(
    store: actae.Store, run: actae.RunInfo, token: int, number: int
) -> None:
    doc = {"outer": [1, {"inner": [number]}]}
    assert_all_refused(store, run, document_calls(store, run, token, doc))


def test_json_documents_refuse_nesting_deeper_than_the_limit(
    store: actae.Store, run: actae.RunInfo, token: int
) -> None:
    itself: list[Any] = []
    itself.append(itself)
    # The tightest: one key, then lists (``{"":[[...]]}``), as short as that depth allows.
    innermost: list[Any] = []
    tight = {"": functools.reduce(lambda inner, _: [inner], range(MAX_DEPTH - 1), innermost)}
    for doc in [nested(MAX_DEPTH + 1), tight, nested(253), nested(400), {"loop": itself}]:
        assert_all_refused(store, run, document_calls(store, run, token, doc))


def test_stored_integers_refuse_values_beyond_signed_64_bits(
    store: actae.Store, run: actae.RunInfo, token: int
) -> None:
    rid, cid = run.run_id, run.channel_id
    rec: dict[str, Any] = {"kind": "k", "payload": {}, "expected_cursor": 1}
    tr: dict[str, Any] = {**rec, "state": {}, "expected_version": 1}
    calls: list[Call] = [
        (
            "pins.schema",
            lambda: store.start_run("wf2", agent_id="a", state={}, pins={"schema": BIG}),
        ),
        ("expected_cursor", lambda: store.record(cid, **{**rec, "expected_cursor": BIG})),
        ("expected_version", lambda: store.transition(cid, **{**tr, "expected_version": BIG})),
        ("expected_cursor", lambda: store.transition(cid, **{**tr, "expected_cursor": BIG})),
        ("at", lambda: store.fork(cid, at=BIG)),
        ("pins.schema", lambda: store.fork(cid, at=1, pins={"schema": 2**80})),
        ("cursor", lambda: store.state_at(cid, cursor=BIG)),
        ("after", lambda: store.events(cid, after=BIG)),
        ("limit", lambda: store.events(cid, limit=2**80)),
        ("after", lambda: store.subscribe(cid, after=BIG)),
        ("after", lambda: store.subscribe(after=BIG)),
        ("batch_size", lambda: store.subscribe(batch_size=BIG)),
        ("batch_size", lambda: store.projector(batch_size=BIG)),
        ("token", lambda: store.heartbeat("fx", token=BIG, worker="w", lease=30.0)),
        ("token", lambda: store.complete_effect("fx", token=BIG, worker="w", result={})),
        ("token", lambda: store.fail_effect("fx", token=BIG, worker="w", error="e")),
        ("token", lambda: store.reconcile("fx", "failed", actor="op", token=BIG)),
        ("pins.schema", lambda: store.resume(rid, worker="w", pins={"schema": BIG})),
        (
            "retry",
            lambda: store.claim(
                "fy", run_id=rid, worker="w", lease=1.0, retry={"max_attempts": BIG}
            ),
        ),
    ]
    assert_all_refused(store, run, calls)


def test_max_document_bytes_beyond_signed_64_bits_is_refused(store_url: str) -> None:
    with pytest.raises(actae.ValidationError) as caught:
        actae.open(store_url, max_document_bytes=BIG)
    assert caught.value.field == "max_document_bytes"


EDGE_DOCUMENT: dict[str, Any] = {
    "deep": nested(MAX_DEPTH - 1),  # with the document itself: exactly MAX_DEPTH levels
    "integers": [2**63 - 1, -(2**63), 2**53 + 1, -(2**53) - 1, 0],
    "not a nul": "\\u0000 is six characters here",
    "astral": "\U0001f600 and \u00e9",
}


def test_values_just_inside_the_limits_are_stored_and_read_back(
    store: actae.Store, run: actae.RunInfo
) -> None:
    receipt = store.transition(
        run.channel_id,
        kind="edge",
        payload=EDGE_DOCUMENT,
        state=EDGE_DOCUMENT,
        expected_version=1,
        expected_cursor=1,
    )
    assert store.state_at(run.channel_id).state == EDGE_DOCUMENT
    assert store.events(run.channel_id, after=1)[0].payload == EDGE_DOCUMENT
    assert store.state_at(run.channel_id, cursor=receipt.cursor).state == EDGE_DOCUMENT


def test_the_read_models_take_values_just_inside_the_limits(store: actae.Store) -> None:
    """What the calls accept, every read model can hold: nothing is left for the projector
    to fail on (the failures the limits exist for: NUL, bigint overflow)."""
    text = "\U0001f600 agent \u00e9"
    run = store.start_run(
        text,
        agent_id=text,
        state=EDGE_DOCUMENT,
        pins={"model": text, "prompt": text, "tools": text, "schema": 2**63 - 1},
    )
    claim = store.claim(text, run_id=run.run_id, worker=text, lease=30.0, request=EDGE_DOCUMENT)
    store.complete_effect(text, token=claim.token, worker=text, result=EDGE_DOCUMENT)
    projector = store.projector()
    projector.catch_up()

    assert projector.errors() == []
    [row] = projector.query("SELECT * FROM run_status")
    assert (row["workflow_id"], row["agent_id"], row["model"]) == (text, text, text)
    assert (row["schema_version"], row["status"]) == (2**63 - 1, "running")
