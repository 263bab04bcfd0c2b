"""Every write command, when the reply to its committed write is lost, answers what it did.

Each case runs twice on PostgreSQL, on the same virtual clock: once directly, once through
:class:`WireProxy`, which lets the command's write reach the server and commit, swallows the
server's answer and cuts the connection. The recorder retries; the proxied call must return
the same result as the direct one (``replayed`` aside), the store must hold the same events
(one effect, not two, and no phantom), and a later normal call must behave.
"""

from __future__ import annotations

import tempfile
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, is_dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from pydantic import BaseModel

import actae
from tests.conftest import with_schema
from tests.custody.sealed import keyring_file
from tests.integration.wire_proxy import WireProxy

pytestmark = pytest.mark.postgres

START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
KEY = "charge"
Ctx = dict[str, Any]


@dataclass(frozen=True)
class Case:
    """``setup`` prepares (its writes are not faulted), ``call`` is the command under test,
    ``after`` is a normal call that must behave afterwards (it may assert)."""

    call: Callable[[actae.Store, Ctx], Any]
    setup: Callable[[actae.Store, actae.ManualClock], Ctx] = lambda store, clock: started(store)
    after: Callable[[actae.Store, Ctx, Any], object] = lambda store, ctx, result: None
    sealed: bool = False
    """Whether the store encrypts (opened with a keyring)."""


def started(store: actae.Store) -> Ctx:
    run = store.start_run("wf", agent_id="a", state={"n": 0})
    return {"run": run, "run_id": run.run_id, "cid": run.channel_id}


def claimed(store: actae.Store, clock: actae.ManualClock, worker: str = "w1") -> Ctx:
    ctx = started(store)
    ctx["claim"] = store.claim(KEY, run_id=ctx["run_id"], worker=worker, lease=30)
    return ctx


def in_doubt(store: actae.Store, clock: actae.ManualClock) -> Ctx:
    ctx = claimed(store, clock, worker="dead")
    clock.advance(31)
    return ctx


def failed_once(store: actae.Store, clock: actae.ManualClock) -> Ctx:
    ctx = claimed(store, clock)
    store.fail_effect(KEY, token=ctx["claim"].token, worker="w1", error="HTTP 503", retry_after=60)
    return ctx


def waiting(reason: str, seconds: float | None = None) -> Callable[..., Ctx]:
    def setup(store: actae.Store, clock: actae.ManualClock) -> Ctx:
        ctx = started(store)
        store.suspend(ctx["run_id"], reason=reason, name="gate", seconds=seconds)
        if seconds is not None:
            clock.advance(seconds + 1)
        return ctx

    return setup


def then(setup_call: Callable[[actae.Store, Ctx], object]) -> Callable[..., Ctx]:
    def setup(store: actae.Store, clock: actae.ManualClock) -> Ctx:
        ctx = started(store)
        setup_call(store, ctx)
        return ctx

    return setup


def status_is(expected: actae.RunStatus) -> Callable[[actae.Store, Ctx, Any], object]:
    def after(store: actae.Store, ctx: Ctx, result: Any) -> None:
        assert store.run(ctx["run_id"]).status is expected

    return after


def finished_long_ago(store: actae.Store, clock: actae.ManualClock) -> Ctx:
    ctx = started(store)
    store.set_retention({"completed": "1d"}, actor="ops")
    store.complete_run(ctx["run_id"], {"answer": 42})
    clock.advance(2 * 86400)
    return ctx


def record_next(store: actae.Store, ctx: Ctx, result: Any) -> None:
    head = store.head(ctx["cid"])
    receipt = store.record(ctx["cid"], kind="next", payload={}, expected_cursor=head.cursor)
    assert receipt.cursor == head.cursor + 1


CASES: dict[str, Case] = {
    "start_run": Case(
        setup=lambda store, clock: {},
        call=lambda store, ctx: store.start_run("wf", agent_id="a", state={"n": 0}),
        after=lambda store, ctx, info: store.record(
            info.channel_id, kind="next", payload={}, expected_cursor=1
        ),
    ),
    "record": Case(
        call=lambda store, ctx: store.record(
            ctx["cid"], kind="note", payload={"i": 1}, expected_cursor=1
        ),
        after=record_next,
    ),
    "transition": Case(
        call=lambda store, ctx: store.transition(
            ctx["cid"],
            kind="step",
            payload={},
            state={"n": 1},
            expected_version=1,
            expected_cursor=1,
        ),
        after=lambda store, ctx, receipt: store.transition(
            ctx["cid"],
            kind="step",
            payload={},
            state={"n": 2},
            expected_version=2,
            expected_cursor=2,
        ),
    ),
    "fork": Case(
        call=lambda store, ctx: store.fork(ctx["cid"], at=1, reason="try again"),
        after=lambda store, ctx, receipt: store.record(
            receipt.child_channel_id, kind="next", payload={}, expected_cursor=1
        ),
    ),
    "claim": Case(
        call=lambda store, ctx: store.claim(KEY, run_id=ctx["run_id"], worker="w1", lease=30),
        after=lambda store, ctx, claim: store.complete_effect(
            KEY, token=claim.token, worker="w1", result={"ok": True}
        ),
    ),
    "heartbeat": Case(
        setup=claimed,
        call=lambda store, ctx: store.heartbeat(
            KEY, token=ctx["claim"].token, worker="w1", lease=60
        ),
        after=lambda store, ctx, info: store.complete_effect(
            KEY, token=ctx["claim"].token, worker="w1", result={"ok": True}
        ),
    ),
    "complete_effect": Case(
        setup=claimed,
        call=lambda store, ctx: store.complete_effect(
            KEY, token=ctx["claim"].token, worker="w1", result={"ok": True}
        ),
        after=lambda store, ctx, info: (
            store.claim(KEY, run_id=ctx["run_id"], worker="w2", lease=30).status == "completed"
            or pytest.fail("a completed effect was granted again")
        ),
    ),
    "doubt_effect": Case(
        setup=claimed,
        call=lambda store, ctx: store.doubt_effect(
            KEY, token=ctx["claim"].token, worker="w1", reason="answered after its deadline"
        ),
        after=lambda store, ctx, info: store.abandon(KEY, actor="ops", reason="gave up"),
    ),
    "fail_effect": Case(
        setup=claimed,
        call=lambda store, ctx: store.fail_effect(
            KEY, token=ctx["claim"].token, worker="w1", error="HTTP 503", retry_after=60
        ),
        after=lambda store, ctx, info: store.abandon(KEY, actor="ops", reason="gave up"),
    ),
    "reconcile": Case(
        setup=in_doubt,
        call=lambda store, ctx: store.reconcile(
            KEY, "completed", actor="ops", result={"charge_id": "ch_1"}
        ),
        after=lambda store, ctx, info: store.claim(
            KEY, run_id=ctx["run_id"], worker="w2", lease=30
        ),
    ),
    "override": Case(
        setup=in_doubt,
        call=lambda store, ctx: store.override(
            KEY, "completed", actor="ops", reason="provider shows it", result=5
        ),
        after=lambda store, ctx, info: store.claim(
            KEY, run_id=ctx["run_id"], worker="w2", lease=30
        ),
    ),
    "abandon": Case(
        setup=failed_once,
        call=lambda store, ctx: store.abandon(KEY, actor="ops", reason="customer left"),
        after=record_next,
    ),
    "approve": Case(
        setup=waiting("approval"),
        call=lambda store, ctx: store.approve(ctx["run_id"], "gate", actor="ops"),
        after=lambda store, ctx, info: store.signal(ctx["run_id"], "later", {"x": 1}),
    ),
    "deny": Case(
        setup=waiting("approval"),
        call=lambda store, ctx: store.deny(ctx["run_id"], "gate", actor="ops", note="no"),
        after=lambda store, ctx, info: store.signal(ctx["run_id"], "later", {"x": 1}),
    ),
    "signal": Case(
        setup=waiting("signal"),
        call=lambda store, ctx: store.signal(ctx["run_id"], "gate", {"go": True}),
        after=lambda store, ctx, info: store.signal(ctx["run_id"], "later", {"x": 1}),
    ),
    "suspend": Case(
        call=lambda store, ctx: store.suspend(ctx["run_id"], reason="signal", name="gate"),
        after=lambda store, ctx, info: store.signal(ctx["run_id"], "gate", {"go": True}),
    ),
    "wake_due": Case(
        setup=waiting("timer", seconds=10),
        call=lambda store, ctx: store.wake_due(ctx["run_id"]),
        after=lambda store, ctx, woke: (
            store.wake_due(ctx["run_id"]) is False or pytest.fail("the timer fired twice")
        ),
    ),
    "pause": Case(
        call=lambda store, ctx: store.pause(ctx["run_id"], actor="ops", reason="look"),
        after=lambda store, ctx, info: store.unpause(ctx["run_id"], actor="ops", reason="ok"),
    ),
    "unpause": Case(
        setup=then(lambda store, ctx: store.pause(ctx["run_id"], actor="ops", reason="look")),
        call=lambda store, ctx: store.unpause(ctx["run_id"], actor="ops", reason="ok"),
        after=lambda store, ctx, info: store.pause(ctx["run_id"], actor="ops", reason="again"),
    ),
    "cancel": Case(
        call=lambda store, ctx: store.cancel(ctx["run_id"], actor="ops", reason="stop"),
        after=status_is(actae.RunStatus.CANCELLED),
    ),
    "complete_run": Case(
        call=lambda store, ctx: store.complete_run(ctx["run_id"], {"answer": 42}),
        after=status_is(actae.RunStatus.COMPLETED),
    ),
    "fail_run": Case(
        call=lambda store, ctx: store.fail_run(ctx["run_id"], "boom", actor="ops"),
        after=lambda store, ctx, info: store.retry_run(ctx["run_id"], actor="ops", reason="fixed"),
    ),
    "forget": Case(
        call=lambda store, ctx: store.forget(ctx["run_id"], actor="dpo", reason="erasure"),
        after=status_is(actae.RunStatus.FORGOTTEN),
        sealed=True,
    ),
    "hold": Case(
        setup=then(lambda store, ctx: store.complete_run(ctx["run_id"], {})),
        call=lambda store, ctx: store.hold(ctx["run_id"], actor="legal", reason="case 17"),
        after=lambda store, ctx, info: store.release(ctx["run_id"], actor="legal", reason="done"),
    ),
    "release": Case(
        setup=then(lambda store, ctx: store.hold(ctx["run_id"], actor="legal", reason="case")),
        call=lambda store, ctx: store.release(ctx["run_id"], actor="legal", reason="closed"),
        after=lambda store, ctx, info: store.hold(ctx["run_id"], actor="legal", reason="again"),
    ),
    "set_retention": Case(
        call=lambda store, ctx: store.set_retention({"completed": "7d"}, actor="ops"),
        after=lambda store, ctx, view: store.set_retention({"failed": "1d"}, actor="ops"),
    ),
    "apply_retention": Case(
        setup=finished_long_ago,
        call=lambda store, ctx: replace(store.apply_retention(actor="ops"), seconds=0.0),
        after=lambda store, ctx, report: (
            store.run(ctx["run_id"]).purged_at is not None or pytest.fail("the run was not purged")
        ),
    ),
    "retry_run": Case(
        setup=then(lambda store, ctx: store.fail_run(ctx["run_id"], "boom", actor="ops")),
        call=lambda store, ctx: store.retry_run(ctx["run_id"], actor="ops", reason="fixed"),
        after=lambda store, ctx, info: store.fail_run(ctx["run_id"], "again", actor="ops"),
    ),
}

NOT_WRITES = {
    "close", "effect", "events", "find_effect", "head", "lineage", "now", "operation",
    "projector", "recover", "run", "state_at", "subscribe", "url", "clock_skew", "position",
    "on_commit", "open_artifact", "retention", "redactor", "encrypting",
    "resume",  # writes only through the commands above (a pin migration is a lifecycle move)
    "put_artifact",  # writes no event: its bytes are named by their digest, so an
    # interrupted put is simply made again and gives the same reference
    "rotate_keys",  # re-wraps keys in place, each checked and swapped: an interrupted or
    # failed rotation is simply run again (tests/custody/test_encryption.py)
}  # fmt: skip


def test_every_write_command_of_the_store_has_a_case() -> None:
    public = {name for name in dir(actae.Store) if not name.startswith("_")}
    assert public - NOT_WRITES - set(CASES) == set(), "a write command without a lost-reply case"


@pytest.fixture
def schemas(pg_dsn: str) -> Iterator[tuple[str, str]]:
    """Two fresh schemas: the direct run's and the proxied run's."""
    names = [f"test_{uuid.uuid4().hex[:16]}" for _ in range(2)]
    yield names[0], names[1]
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for name in names:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def topics(dsn: str, schema: str) -> Counter[str]:
    """How many events of each kind the schema's event store holds."""
    with psycopg.connect(dsn) as conn:
        (table,) = conn.execute(
            "SELECT table_name FROM information_schema.columns WHERE table_schema = %s"
            " AND column_name = 'notification_id'",
            [schema],
        ).fetchone() or ("?",)
        rows = conn.execute(
            sql.SQL("SELECT topic FROM {}.{}").format(sql.Identifier(schema), sql.Identifier(table))
        ).fetchall()
    return Counter(topic for (topic,) in rows)


def shape(value: Any) -> Any:
    """A result with its ids and ``replayed`` flags blanked, comparable across two stores."""
    if isinstance(value, BaseModel):
        value = value.model_dump()
    elif is_dataclass(value) and not isinstance(value, type):
        value = asdict(value)
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items() if k != "replayed"}
    if isinstance(value, list | tuple):
        return [shape(v) for v in value]
    if isinstance(value, uuid.UUID):
        return "<id>"
    if isinstance(value, str):
        try:
            uuid.UUID(value)
        except ValueError:
            return value
        return "<id>"
    return value


def play(case: Case, url: str, proxy: WireProxy | None) -> tuple[Any, Counter[str], Any]:
    """Run a case; the command's result, the events it added, the normal call's result."""
    dsn, _, schema = url.partition("?schema=")
    clock = actae.ManualClock(START)
    keyring = str(keyring_file(Path(tempfile.mkdtemp()))) if case.sealed else None
    with actae.open(proxy.url(url) if proxy else url, clock=clock, keyring=keyring) as store:
        ctx = case.setup(store, clock)
        before = topics(dsn, schema)
        if proxy is not None:
            proxy.drop_next_write_reply()
        result = case.call(store, ctx)
        if proxy is not None:
            assert proxy.dropped_replies == 1, "the fault did not fire: the test proved nothing"
        added = topics(dsn, schema) - before
        later = case.after(store, ctx, result)
    return result, added, later


@pytest.mark.parametrize("command", sorted(CASES))
def test_a_lost_reply_returns_what_the_command_did_and_nothing_twice(
    command: str, pg_dsn: str, schemas: tuple[str, str]
) -> None:
    case = CASES[command]
    direct, proxied = (with_schema(pg_dsn, schema) for schema in schemas)
    expected, expected_added, expected_later = play(case, direct, None)
    with WireProxy() as proxy:
        result, added, later = play(case, proxied, proxy)
    assert shape(result) == shape(expected)
    assert added == expected_added  # exactly the events of one execution: no duplicate
    assert shape(later) == shape(expected_later)


def test_a_lost_claim_reply_leaves_the_claim_with_the_caller(pg_url: str) -> None:
    clock = actae.ManualClock(START)
    with WireProxy() as proxy, actae.open(proxy.url(pg_url), clock=clock) as store:
        run = store.start_run("wf", agent_id="a", state={})
        proxy.drop_next_write_reply()
        claim = store.claim(KEY, run_id=run.run_id, worker="w1", lease=30)
        assert proxy.dropped_replies == 1
        info = store.effect(KEY)
        assert (claim.status, info.holder, info.token, len(info.attempts)) == (
            "granted",
            "w1",
            claim.token,
            1,
        )
        clock.advance(31)  # no phantom: after the lease, the one attempt is the caller's
        assert [a.worker for a in store.effect(KEY).attempts] == ["w1"]


def test_a_lost_start_reply_makes_one_run_and_one_fork_one_child(pg_url: str) -> None:
    clock = actae.ManualClock(START)
    with WireProxy() as proxy, actae.open(proxy.url(pg_url), clock=clock) as store:
        parent = store.start_run("parent", agent_id="a", state={})
        proxy.drop_next_write_reply()
        child = store.start_run("child", agent_id="a", state={}, parent_run_id=parent.run_id)
        proxy.drop_next_write_reply()
        fork = store.fork(parent.channel_id, at=1)
        assert proxy.dropped_replies == 2
        assert store.run(child.run_id).parent_run_id == parent.run_id
        assert [r.child_run_id for r in store.lineage(parent.run_id).descendants] == [
            fork.child_run_id
        ]
        projector = store.projector()
        projector.catch_up()
        rows = projector.query("SELECT workflow_id FROM run_status ORDER BY workflow_id")
        assert [row["workflow_id"] for row in rows] == ["child", "parent", "parent"]
