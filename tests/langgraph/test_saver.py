"""What a LangGraph thread is in Actae, and what the saver's writes and deletions leave behind.

The conformance suite (test_conformance.py) holds the savers to LangGraph's contract; these
hold them to Actae's: a thread is a run, a checkpoint a transition, writes are idempotent
records, a second writer is refused, a deletion ends the thread's runs, a copy a fork, and the
async saver waits for the store without holding up its event loop.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast
from uuid import uuid4

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint, CheckpointMetadata, empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.serde.types import INTERRUPT

import actae
from actae.adapters.custody.keyring import new_keyring, save_keyring
from actae.adapters.langgraph.encoding import CHECKPOINT, COPIED, FORGOTTEN, WRITES
from actae.langgraph import ActaeSaver, AsyncActaeSaver
from tests.helpers import ticks_while


@pytest.fixture
def saver(store: actae.Store) -> ActaeSaver:
    return ActaeSaver(store)


@pytest.fixture
def memory_saver() -> Iterator[ActaeSaver]:
    with ActaeSaver.from_url("memory://") as saver:
        yield saver


def config(thread_id: str, checkpoint_id: str | None = None, ns: str = "") -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ns}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def checkpoint(**values: Any) -> Checkpoint:
    made = empty_checkpoint()
    made["id"] = str(uuid6(clock_seq=-1))
    made["channel_values"] = dict(values)
    made["channel_versions"] = dict.fromkeys(values, 1)
    return made


def metadata(step: int, **extra: Any) -> CheckpointMetadata:
    return cast(CheckpointMetadata, {"source": "loop", "step": step, "parents": {}, **extra})


def put(saver: ActaeSaver, parent: RunnableConfig, step: int, **values: Any) -> RunnableConfig:
    return saver.put(parent, checkpoint(**values), metadata(step, run_id="r1"), {})


@pytest.fixture
def two_savers(tmp_path: Path) -> Iterator[tuple[ActaeSaver, ActaeSaver]]:
    """Two savers on one store file, each with a store of its own: two processes' writers."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    with ActaeSaver.from_url(url) as mine, ActaeSaver.from_url(url) as other:
        yield mine, other


def cut_in(
    monkeypatch: pytest.MonkeyPatch, store: actae.Store, other: Callable[[], object]
) -> None:
    """Let ``other`` write just before ``store``'s next transition goes out (once)."""
    transition = store.transition

    def after_the_other(*args: Any, **kwargs: Any) -> actae.Receipt:
        monkeypatch.setattr(store, "transition", transition)
        other()
        return transition(*args, **kwargs)

    monkeypatch.setattr(store, "transition", after_the_other)


def asked(monkeypatch: pytest.MonkeyPatch, store: actae.Store, *names: str) -> list[str]:
    """The log of ``store``'s calls of ``names`` from now on, with the cursor each expects."""
    log: list[str] = []
    for name in names:
        method = getattr(store, name)

        def logged(*args: Any, _name: str = name, _method: Any = method, **kwargs: Any) -> Any:
            expected = [kwargs.get(key) for key in ("expected_version", "expected_cursor")]
            log.append(" ".join([_name, *(str(value) for value in expected if value is not None)]))
            return _method(*args, **kwargs)

        monkeypatch.setattr(store, name, logged)
    return log


def kinds(store: actae.Store, channel_id: object) -> list[str]:
    return [event.kind for event in store.events(str(channel_id))]


def test_a_thread_is_a_run_and_a_checkpoint_a_transition(
    saver: ActaeSaver, store: actae.Store
) -> None:
    first = put(saver, config("t1"), 0, topic="refund")
    second = put(saver, first, 1, topic="refund", amount=120)
    saver.put_writes(second, [("amount", 130)], task_id="task-1", task_path="~pay")

    run = saver.thread_run("t1")
    assert run is not None
    assert (run.workflow_id, run.agent_id, run.status) == ("langgraph", "langgraph", "running")
    assert store.run(run.run_id) == run
    assert kinds(store, run.channel_id) == ["run.started", CHECKPOINT, CHECKPOINT, WRITES]
    # Each checkpoint is a state version; the event repeats what a log reader needs.
    head = store.recover(run.channel_id)
    assert head.state.state["checkpoint_id"] == second["configurable"]["checkpoint_id"]
    assert head.state.version == 3
    event = store.events(run.channel_id)[2]
    assert {k: event.contents()[k] for k in ("thread_id", "source", "step", "run_id")} == {
        "thread_id": "t1",
        "source": "loop",
        "step": 1,
        "run_id": "r1",
    }
    assert event.contents()["parent_checkpoint_id"] == first["configurable"]["checkpoint_id"]
    # And LangGraph reads it all back.
    found = saver.get_tuple(config("t1"))
    assert found is not None
    assert found.checkpoint["channel_values"] == {"topic": "refund", "amount": 120}
    assert found.pending_writes == [("task-1", "amount", 130)]
    assert found.parent_config == config("t1", first["configurable"]["checkpoint_id"])


def test_a_saver_starts_threads_under_the_names_it_has_now(
    saver: ActaeSaver, store: actae.Store
) -> None:
    """``workflow_id`` and ``agent_id`` are public attributes: a new value is the one used."""
    saver.workflow_id, saver.agent_id = "billing", "refunder"
    put(saver, config("t-renamed"), 0, topic="refund")

    run = saver.thread_run("t-renamed")
    assert run is not None
    assert (run.workflow_id, run.agent_id) == ("billing", "refunder")


def test_a_retried_put_and_put_writes_write_nothing_twice(
    memory_saver: ActaeSaver,
) -> None:
    saver, store = memory_saver, memory_saver.store
    made = checkpoint(topic="refund")
    stored = saver.put(config("t1"), made, metadata(0), {})
    assert saver.put(config("t1"), made, metadata(0), {}) == stored
    for _ in range(2):
        saver.put_writes(stored, [("a", 1), ("b", 2)], task_id="task-1")
    run = saver.thread_run("t1")
    assert run is not None
    assert kinds(store, run.channel_id) == ["run.started", CHECKPOINT, WRITES]
    # An ordinary write keeps the first value stored for its task and index ...
    saver.put_writes(stored, [("a", 99)], task_id="task-1")
    # ... an interrupt replaces the one before it, as every LangGraph saver upserts it.
    saver.put_writes(stored, [(INTERRUPT, "first")], task_id="task-1")
    saver.put_writes(stored, [(INTERRUPT, "second")], task_id="task-1")
    found = saver.get_tuple(stored)
    assert found is not None
    assert sorted(found.pending_writes or []) == [
        ("task-1", INTERRUPT, "second"),
        ("task-1", "a", 1),
        ("task-1", "b", 2),
    ]


def test_a_second_writer_on_the_thread_is_refused(
    two_savers: tuple[ActaeSaver, ActaeSaver], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two processes resuming one thread: each computed its checkpoint from the same head.
    saver, other = two_savers
    base = saver.put(config("t1"), checkpoint(step=0), metadata(0), {})
    # The put reads the head, then writes after it: the other writer gets there in between.
    cut_in(monkeypatch, saver.store, lambda: other.put(base, checkpoint(step=1), metadata(1), {}))
    with pytest.raises(actae.ConflictError) as refused:
        saver.put(base, checkpoint(step=1), metadata(1), {})
    assert (refused.value.expected_version, refused.value.actual_version) == (2, 3)


def test_a_put_that_only_pending_writes_overtook_is_retried(
    two_savers: tuple[ActaeSaver, ActaeSaver], monkeypatch: pytest.MonkeyPatch
) -> None:
    saver, other = two_savers
    base = saver.put(config("t1"), checkpoint(step=0), metadata(0), {})
    log = asked(monkeypatch, saver.store, "head", "transition")
    cut_in(monkeypatch, saver.store, lambda: other.put_writes(base, [("x", 1)], task_id="late"))
    nxt = checkpoint(step=1)
    assert saver.put(base, nxt, metadata(1), {}) == config("t1", nxt["id"])
    # Refused, it tries again after the head the refusal reports, without reading it.
    assert log == ["head", "transition 2 2", "transition 2 3"]
    run = saver.thread_run("t1")
    assert run is not None
    assert kinds(saver.store, run.channel_id) == ["run.started", CHECKPOINT, WRITES, CHECKPOINT]


def test_writes_recorded_before_their_checkpoint_belong_to_it(memory_saver: ActaeSaver) -> None:
    # LangGraph saves in the background: a graph's input is written before the checkpoint
    # it belongs to, and a fast task's writes can overtake a slow put.
    saver, store = memory_saver, memory_saver.store
    base = saver.put(config("t1"), checkpoint(step=0), metadata(0), {})
    nxt = checkpoint(step=1)
    saver.put_writes(config("t1", nxt["id"]), [("question", "refund?")], task_id="input")
    assert saver.put(base, nxt, metadata(1), {}) == config("t1", nxt["id"])
    run = saver.thread_run("t1")
    assert run is not None
    assert kinds(store, run.channel_id) == ["run.started", CHECKPOINT, WRITES, CHECKPOINT]
    assert store.state_at(run.channel_id).state["writes_from"] == 3  # where they start
    for reader in (saver, ActaeSaver(store)):  # this process, and one that knows nothing
        latest = reader.get_tuple(config("t1"))
        assert latest is not None
        assert latest.pending_writes == [("input", "question", "refund?")]
        (listed,) = reader.list(config("t1"), limit=1)
        assert listed.pending_writes == [("input", "question", "refund?")]


def test_delete_thread_ends_the_threads_runs_for_retention(
    saver: ActaeSaver, store: actae.Store
) -> None:
    first = put(saver, config("t1"), 0)
    put(saver, first, 1)
    put(saver, config("t1", ns="child:1"), 0)
    run = saver.thread_run("t1")
    assert run is not None

    saver.delete_thread("t1")
    saver.delete_thread("t1")  # nothing is left to delete
    assert saver.get_tuple(config("t1")) is None
    assert saver.get_tuple(config("t1", ns="child:1")) is None
    assert list(saver.list(config("t1"))) == []
    assert saver.thread_run("t1") is None
    ended = store.run(run.run_id)
    assert ended.status is actae.RunStatus.COMPLETED  # for the store's retention to purge
    assert ended.result == {"deleted": "LangGraph delete_thread: thread 't1'"}
    assert [c for c in store.lineage(run.run_id).children if store.run(c).ended_at] == list(
        store.lineage(run.run_id).children
    )

    # A later put starts the thread afresh, on a new run; the same checkpoint again too.
    again = saver.put(config("t1"), checkpoint(step=9), metadata(0), {})
    assert [t.config for t in saver.list(config("t1"))] == [again]
    fresh = saver.thread_run("t1")
    assert fresh is not None
    assert fresh.run_id != run.run_id
    saver.delete_thread("t1")
    made = checkpoint(step=10)
    saver.put(config("t1"), made, metadata(0), {})
    saver.delete_thread("t1")
    saver.put(config("t1"), made, metadata(0), {})
    assert [t.checkpoint["id"] for t in saver.list(config("t1"))] == [made["id"]]


def test_delete_thread_forgets_the_threads_runs_when_the_store_encrypts(
    tmp_path: Path,
) -> None:
    keys = tmp_path / "keys.json"
    save_keyring(new_keyring(), keys, replace=False)
    with actae.open("memory://", keyring=str(keys)) as store:
        saver = ActaeSaver(store)
        put(saver, config("t1"), 0, note="patient 7")
        run = saver.thread_run("t1")
        assert run is not None
        saver.delete_thread("t1")
        assert store.run(run.run_id).status is actae.RunStatus.FORGOTTEN
        assert all(event.forgotten for event in store.events(run.channel_id))
        assert saver.get_tuple(config("t1")) is None
        later = put(saver, config("t1"), 0, note="new")
        assert saver.get_tuple(later) is not None


def test_copy_thread_is_a_fork_with_a_receipt(saver: ActaeSaver, store: actae.Store) -> None:
    first = put(saver, config("src"), 0, n=0)
    second = put(saver, first, 1, n=1)
    saver.put_writes(second, [("n", 2)], task_id="task-1")
    put(saver, config("src", ns="child:1"), 0, n=10)

    saver.copy_thread("src", "dst")
    source, copy = saver.thread_run("src"), saver.thread_run("dst")
    assert source is not None
    assert copy is not None
    assert copy.forked_from is not None
    assert copy.forked_from.parent_run_id == source.run_id
    assert copy.forked_from.reason == "LangGraph copy_thread: thread 'src' copied to thread 'dst'"
    assert [d.child_run_id for d in store.lineage(source.run_id).descendants] == [copy.run_id]

    def listed(thread_id: str, ns: str = "") -> list[tuple[str, Any, Any]]:
        return [
            (t.checkpoint["id"], t.checkpoint["channel_values"], t.pending_writes)
            for t in saver.list(config(thread_id, ns=ns))
        ]

    assert listed("dst") == listed("src")
    assert listed("dst", "child:1") == listed("src", "child:1")
    # They are two threads from now on.
    put(saver, config("dst", second["configurable"]["checkpoint_id"]), 2, n=3)
    saver.delete_thread("src")
    assert [values["n"] for _, values, _ in listed("dst")] == [3, 1, 0]
    assert listed("src") == []
    # Copying into a thread that exists splices the source in after what it has.
    put(saver, config("src"), 0, n=100)
    saver.copy_thread("dst", "src")
    assert [values["n"] for _, values, _ in listed("src")] == [3, 1, 0, 100]
    again = saver.thread_run("src")
    assert again is not None
    assert kinds(store, again.channel_id)[-1] == COPIED


def test_prune_and_delete_for_runs_hide_checkpoints_in_copies_too(
    memory_saver: ActaeSaver,
) -> None:
    saver, store = memory_saver, memory_saver.store
    parent = config("t1")
    for step, run_id in enumerate(["keep", "drop", "keep", "drop"]):
        parent = saver.put(parent, checkpoint(step=step), metadata(step, run_id=run_id), {})
    saver.copy_thread("t1", "t2")
    saver.delete_for_runs(["drop"])
    for thread_id in ("t1", "t2"):
        steps = [t.metadata["step"] for t in saver.list(config(thread_id))]
        assert steps == [2, 0]
    t1 = saver.thread_run("t1")
    assert t1 is not None
    (forget,) = [e for e in store.events(t1.channel_id) if e.kind == FORGOTTEN]
    assert forget.contents()["run_ids"] == ["drop"]
    latest = saver.get_tuple(config("t1"))
    assert latest is not None
    assert latest.metadata["step"] == 2

    saver.prune(["t2"], strategy="keep_latest")
    assert [t.metadata["step"] for t in saver.list(config("t2"))] == [2]
    assert [t.metadata["step"] for t in saver.list(config("t1"))] == [2, 0]
    with pytest.raises(ValueError, match="unknown prune strategy"):
        saver.prune(["t1"], strategy="everything")


def test_namespaces_are_child_runs_of_the_thread(saver: ActaeSaver, store: actae.Store) -> None:
    root = put(saver, config("t1"), 0)
    child = put(saver, config("t1", ns="tools:abc"), 0)
    run = saver.thread_run("t1")
    assert run is not None
    (child_run,) = store.lineage(run.run_id).children
    assert store.run(child_run).workflow_id == "langgraph"
    listed = {t.config["configurable"]["checkpoint_ns"] for t in saver.list(config("t1"))}
    assert listed == {""}  # the config names the root namespace
    everything = [t.config for t in saver.list({"configurable": {"thread_id": "t1"}})]
    assert sorted(c["configurable"]["checkpoint_id"] for c in everything) == sorted(
        c["configurable"]["checkpoint_id"] for c in (root, child)
    )


def test_listing_without_a_thread_lists_every_thread(memory_saver: ActaeSaver) -> None:
    for thread_id in ("a", "b"):
        memory_saver.put(config(thread_id), checkpoint(), metadata(0, owner=thread_id), {})
    memory_saver.copy_thread("a", "c")
    found = {t.config["configurable"]["thread_id"] for t in memory_saver.list(None)}
    assert found == {"a", "b", "c"}
    owners = [dict(t.metadata)["owner"] for t in memory_saver.list(None, filter={"owner": "b"})]
    assert owners == ["b"]


def test_putting_a_checkpoint_again_with_other_content_revises_it(
    memory_saver: ActaeSaver,
) -> None:
    saver = memory_saver
    made = checkpoint(n=1)
    stored = saver.put(config("t1"), made, metadata(0), {})
    saver.put_writes(stored, [("n", 2)], task_id="task-1")
    saver.put(config("t1"), made, metadata(0, note="revised"), {})
    found = saver.get_tuple(stored)
    assert found is not None
    assert dict(found.metadata)["note"] == "revised"
    assert found.pending_writes == [("task-1", "n", 2)]
    assert len(list(saver.list(config("t1")))) == 1


def test_a_thread_id_must_fit_an_operation_id(memory_saver: ActaeSaver) -> None:
    with pytest.raises(ValueError, match="thread_id must be 1 to 256 characters"):
        memory_saver.get_tuple(config("x" * 257))
    assert memory_saver.get_tuple(config(str(uuid4()))) is None


def test_each_saver_answers_the_other_style_of_call(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"

    async def main() -> list[object]:
        async with AsyncActaeSaver.from_url(url) as saver:
            stored = await saver.aput(config("t1"), checkpoint(n=1), metadata(0), {})
            # A blocking caller in another thread (graph.invoke, get_state) waits for the loop.
            found = await asyncio.to_thread(saver.get_tuple, stored)
            listed = await asyncio.to_thread(lambda: list(saver.list(config("t1"))))
            run = await asyncio.to_thread(saver.thread_run, "t1")
            with pytest.raises(asyncio.InvalidStateError, match="from another thread"):
                saver.get_tuple(stored)  # on the loop's own thread it would wait for itself
            assert run == await saver.athread_run("t1")
            return [found, *listed]

    found, listed = asyncio.run(main())
    assert found == listed
    with ActaeSaver.from_url(url) as blocking:  # and ActaeSaver's coroutines, in a thread
        again = asyncio.run(blocking.aget_tuple(config("t1")))
    assert again == found


async def test_the_async_saver_waits_for_a_locked_store_without_holding_up_its_loop(
    tmp_path: Path,
) -> None:
    # Its coroutines run the blocking saver's code in a greenback portal: where the store
    # waits (here for another process's lock on the file), the loop serves other coroutines.
    path = tmp_path / "runs.db"
    async with AsyncActaeSaver.from_url(f"sqlite:///{path}") as saver:
        first = await saver.aput(config("t1"), checkpoint(n=1), metadata(0), {})
        holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        holder.execute("BEGIN IMMEDIATE")
        let_go = threading.Timer(0.5, holder.execute, ("ROLLBACK",))  # even if the loop hangs
        let_go.start()
        ticks, stored = await ticks_while(saver.aput(first, checkpoint(n=2), metadata(1), {}))
        let_go.join()
        holder.close()
        latest = await saver.aget_tuple(config("t1"))
    assert latest is not None
    assert latest.config == stored
    assert ticks >= 20  # 0.5 s of 10 ms ticks; had the put blocked the loop: 0 or 1


def test_the_async_savers_redact_and_keyring_reach_its_store(tmp_path: Path) -> None:
    keys = tmp_path / "keys.json"
    save_keyring(new_keyring(), keys, replace=False)
    url = f"sqlite:///{tmp_path / 'runs.db'}"

    async def opened() -> tuple[object, bool]:
        async with AsyncActaeSaver.from_url(url, redact=True, keyring=str(keys)) as saver:
            return saver.redact, saver.store.encrypting

    redactor, encrypting = asyncio.run(opened())
    with ActaeSaver.from_url(url, redact=True, keyring=str(keys)) as blocking:
        assert (blocking.redact is not None, blocking.store.encrypting) == (True, True)
    assert (redactor is not None, encrypting) == (True, True)


def test_a_put_repeated_after_a_prune_hid_it_is_stored_again(memory_saver: ActaeSaver) -> None:
    saver, first = memory_saver, checkpoint(step=0)
    saver.put(config("t"), first, metadata(0), {})
    put(saver, config("t", first["id"]), 1)
    saver.prune(["t"], strategy="keep_latest")
    assert saver.get_tuple(config("t", first["id"])) is None
    saver.put(config("t"), first, metadata(0), {})  # a retry of the first put, after the prune
    again = saver.get_tuple(config("t", first["id"]))
    assert again is not None
    assert again.checkpoint["id"] == first["id"]


def test_an_unknown_from_url_option_is_refused_at_the_call_before_a_store_is_made(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.db"
    with pytest.raises(TypeError, match="workflow"):
        ActaeSaver.from_url(f"sqlite:///{path}", workflow="w")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="workflow"):
        AsyncActaeSaver.from_url(f"sqlite:///{path}", workflow="w")  # type: ignore[call-arg]
    assert not path.exists()
