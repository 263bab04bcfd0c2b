"""Property: random command sequences agree with a plain model of runs and channels.

The machine issues start / record / transition / fork with correct and stale expectations,
fresh, repeated and conflicting operation ids. After every step the store, a store freshly
opened on the same data, and the model agree on every channel's events and on
``state_at(c)`` for every cursor.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)

import actae

# Storable text (no NUL, no lone surrogate) and signed 64-bit integers: what stores accept.
storable_text = st.characters(codec="utf-8", exclude_characters="\x00")
json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.text(storable_text, max_size=8),
)
json_docs = st.dictionaries(
    st.text(storable_text, max_size=6),
    st.recursive(json_leaf, lambda inner: st.lists(inner, max_size=3), max_leaves=5),
    max_size=3,
)


@dataclass
class ModelChannel:
    """What a channel must contain: events (kind, payload, version, state cursor), states."""

    run_id: uuid.UUID
    parent_run_id: uuid.UUID | None = None
    events: list[tuple[str, dict[str, Any], int, int]] = field(default_factory=list)
    states: list[tuple[int, dict[str, Any]]] = field(default_factory=list)

    @property
    def head(self) -> int:
        return len(self.events)

    @property
    def version(self) -> int:
        return len(self.states)

    def append(self, kind: str, payload: dict[str, Any], state: dict[str, Any] | None) -> None:
        if state is not None:
            self.states.append((self.head + 1, state))
        self.events.append((kind, payload, self.version, self.states[-1][0]))

    def state_at(self, cursor: int) -> tuple[int, int, dict[str, Any]]:
        version = self.events[cursor - 1][2]
        created, state = self.states[version - 1]
        return version, created, state


@dataclass
class Operation:
    """A command that succeeded, so that it can be repeated (replay) or reused (conflict)."""

    command: str
    args: dict[str, Any]
    result: Any


class StoreMachine(RuleBasedStateMachine):
    url: str
    reopenable: bool

    channels = Bundle("channels")
    operations = Bundle("operations")

    def __init__(self) -> None:
        super().__init__()
        self.store = actae.open(self.url)
        self.model: dict[uuid.UUID, ModelChannel] = {}
        self.prefix = uuid.uuid4().hex[:8]
        self.counter = 0

    def teardown(self) -> None:
        self.store.close()

    def new_op(self, use: bool) -> str | None:
        self.counter += 1
        return f"{self.prefix}:{self.counter}" if use else None

    def call(self, op: Operation) -> Any:
        method = getattr(self.store, op.command)
        return method(**op.args)

    # -- rules ----------------------------------------------------------------------------

    @rule(target=channels, state=json_docs, use_op=st.booleans())
    def start(self, state: dict[str, Any], use_op: bool) -> uuid.UUID:
        workflow = f"{self.prefix}-wf-{self.counter}"
        run = self.store.start_run(
            workflow, agent_id="agent", state=state, operation_id=self.new_op(use_op)
        )
        assert (run.cursor, run.state_version, run.replayed) == (1, 1, False)
        channel = ModelChannel(run.run_id)
        channel.append("run.started", {"workflow_id": workflow, "agent_id": "agent"}, state)
        self.model[run.channel_id] = channel
        return run.channel_id

    @rule(
        target=operations,
        channel_id=channels,
        payload=json_docs,
        state=st.none() | json_docs,
        skew=st.sampled_from([0, 0, 0, -1, 1]),
        version_skew=st.sampled_from([0, 0, 0, -1, 1]),
        use_op=st.booleans(),
    )
    def write(
        self,
        channel_id: uuid.UUID,
        payload: dict[str, Any],
        state: dict[str, Any] | None,
        skew: int,
        version_skew: int,
        use_op: bool,
    ) -> Any:
        channel = self.model[channel_id]
        op_id = self.new_op(use_op)
        args: dict[str, Any] = {
            "channel_id": channel_id,
            "kind": "step" if state is not None else "note",
            "payload": payload,
            "expected_cursor": channel.head + skew,
            "operation_id": op_id,
        }
        command = "record"
        if state is not None:
            command = "transition"
            args |= {"state": state, "expected_version": channel.version + version_skew}
        else:
            version_skew = 0  # a record does not check the state version
        if skew != 0 or version_skew != 0:
            too_low = channel.head + skew < 1 or channel.version + version_skew < 1
            error = actae.ValidationError if too_low else actae.ConflictError
            with pytest.raises(error):
                self.call(Operation(command, args, None))
            return multiple()
        receipt = self.call(Operation(command, args, None))
        channel.append(args["kind"], payload, state)
        assert (receipt.cursor, receipt.state_version) == (channel.head, channel.version)
        return multiple(Operation(command, args, receipt)) if op_id else multiple()

    @rule(target=channels, channel_id=channels, data=st.data(), use_op=st.booleans())
    def fork(self, channel_id: uuid.UUID, data: st.DataObject, use_op: bool) -> uuid.UUID:
        parent = self.model[channel_id]
        at = data.draw(st.integers(1, parent.head))
        version, created, state = parent.state_at(at)
        receipt = self.store.fork(channel_id, at=at, operation_id=self.new_op(use_op))
        assert (receipt.resolved_boundary, receipt.state_version) == (created, version)
        child = ModelChannel(receipt.child_run_id, parent_run_id=parent.run_id)
        child.append(
            "run.forked",
            {"parent_channel_id": str(channel_id), "resolved_boundary": created},
            state,
        )
        self.model[receipt.child_channel_id] = child
        return receipt.child_channel_id

    @rule(op=operations)
    def repeat(self, op: Operation) -> None:
        again = self.call(op)
        assert again.replayed is True
        assert (again.cursor, again.state_version) == (op.result.cursor, op.result.state_version)

    @rule(op=consumes(operations), channel_id=channels)
    def reuse_for_other_content(self, op: Operation, channel_id: uuid.UUID) -> None:
        channel = self.model[channel_id]
        with pytest.raises(actae.OperationConflictError):
            self.store.record(
                channel_id,
                kind="other",
                payload={"different": True},
                expected_cursor=channel.head,
                operation_id=op.args["operation_id"],
            )

    # -- invariants -----------------------------------------------------------------------

    def check(self, store: actae.Store) -> None:
        for channel_id, channel in self.model.items():
            events = store.events(channel_id)
            assert [(e.kind, e.payload, e.state_version, e.state_cursor) for e in events] == (
                channel.events
            )
            assert [e.cursor for e in events] == list(range(1, channel.head + 1))
            for cursor in range(1, channel.head + 1):
                seen = store.state_at(channel_id, cursor=cursor)
                assert (seen.version, seen.cursor, seen.state) == channel.state_at(cursor)
            assert store.head(channel_id).cursor == channel.head

    @invariant()
    def store_agrees_with_model(self) -> None:
        self.check(self.store)

    @invariant()
    def projections_agree_with_model(self) -> None:
        projector = self.store.projector()
        projector.catch_up()
        rows = {
            str(r["run_id"]): r
            for r in projector.query("SELECT * FROM run_status")
            if r["workflow_id"].startswith(self.prefix)
        }
        assert len(rows) == len(self.model)
        for channel in self.model.values():
            row = rows[str(channel.run_id)]
            assert (row["head_cursor"], row["state_version"]) == (channel.head, channel.version)
            assert row["status"] == "running"
        edges = {
            str(r["child_run_id"]): str(r["parent_run_id"])
            for r in projector.query("SELECT * FROM lineage")
            if r["workflow_id"].startswith(self.prefix)
        }
        assert edges == {
            str(c.run_id): str(c.parent_run_id)
            for c in self.model.values()
            if c.parent_run_id is not None
        }

    @precondition(lambda self: self.reopenable)
    @invariant()
    def reopened_store_agrees_with_model(self) -> None:
        with actae.open(self.url) as fresh:
            self.check(fresh)


def run_machine(url: str, *, reopenable: bool, examples: int) -> None:
    machine = type("Machine", (StoreMachine,), {"url": url, "reopenable": reopenable})
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=examples,
            stateful_step_count=12,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )


def test_memory_store_agrees_with_model() -> None:
    run_machine("memory://", reopenable=False, examples=60)


def test_sqlite_store_agrees_with_model(tmp_path: Path) -> None:
    run_machine(f"sqlite:///{tmp_path / 'runs.db'}", reopenable=True, examples=25)


@pytest.mark.postgres
def test_postgres_store_agrees_with_model(pg_url: str) -> None:
    # Fewer sequences than on SQLite, which explores the model; each step here reopens a
    # PostgreSQL store, and these hold that backend to the same model.
    run_machine(pg_url, reopenable=True, examples=8)
