"""Real LangGraph graphs on the savers: an interrupt answered in another process; a fan-out.

The interrupted graph (``refund_graph.py``) runs in two processes on one store: the first
runs it until it asks a person, the second answers with ``Command(resume=...)``. The node
before the question must have run exactly once, and the thread must be an Actae run like
any other: in ``store.run`` and in the ``run_status`` read model.

The fanned graph runs on LangGraph's ``InMemorySaver`` and on Actae, and must leave the
same checkpoints and pending writes in both.
"""

from __future__ import annotations

import asyncio
import json
import operator
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Interrupt, Send, interrupt

import actae
from actae.adapters.langgraph.encoding import CHECKPOINT, WRITES
from actae.langgraph import ActaeSaver, AsyncActaeSaver

GRAPH = Path(__file__).with_name("refund_graph.py")


def in_a_process(*args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(GRAPH), *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    outcome: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return outcome


def test_an_interrupt_is_answered_from_another_process(durable_url: str, tmp_path: Path) -> None:
    log = tmp_path / "nodes.log"
    asked = in_a_process("start", durable_url, "refund-42", str(log))
    assert asked == {"asked": [{"question": "refund 120?"}]}
    assert log.read_text().splitlines() == ["quote"]

    done = in_a_process("resume", durable_url, "refund-42", str(log), "yes")
    assert done == {"state": {"amount": 120, "approved": "yes", "paid": True}}
    assert log.read_text().splitlines() == ["quote", "approve", "pay"]  # quote ran once

    with actae.open(durable_url) as store:
        run = ActaeSaver(store).thread_run("refund-42")
        assert run is not None
        assert store.run(run.run_id) == run
        assert (run.workflow_id, run.agent_id, run.status) == ("langgraph", "refunds", "running")
        kinds = [event.kind for event in store.events(run.channel_id)]
        assert kinds.count(CHECKPOINT) == 5  # input, quote, approve's ask, approve, pay
        assert WRITES in kinds
        projector = store.projector()
        projector.catch_up()
        rows = projector.query("SELECT run_id, workflow_id, agent_id, status FROM run_status")
        mine = [row for row in rows if str(row["run_id"]) == str(run.run_id)]
        assert [(r["workflow_id"], r["agent_id"], r["status"]) for r in mine] == [
            ("langgraph", "refunds", "running")
        ]


class Fanned(TypedDict):
    items: list[int]
    squares: Annotated[list[int], operator.add]
    answer: str


def fanned_graph() -> StateGraph[Fanned]:
    """Sends fan out to tasks that finish together, then a person is asked."""

    def fan_out(state: Fanned) -> list[Send]:
        return [Send("square", {"items": [n], "squares": [], "answer": ""}) for n in state["items"]]

    async def square(state: Fanned) -> dict[str, list[int]]:
        await asyncio.sleep(0.001 * state["items"][0])
        return {"squares": [state["items"][0] ** 2]}

    def ask(state: Fanned) -> dict[str, str]:
        return {"answer": interrupt("ok?")}

    builder = StateGraph(Fanned)
    builder.add_node("square", square)
    builder.add_node("ask", ask)
    builder.add_conditional_edges(START, fan_out, ["square"])
    builder.add_edge("square", "ask")
    builder.add_edge("ask", END)
    return builder


async def history_of(saver: BaseCheckpointSaver[Any]) -> list[tuple[object, ...]]:
    """Run the fanned graph three times on one thread; every checkpoint and its writes."""
    graph = fanned_graph().compile(checkpointer=saver)
    config: RunnableConfig = {"configurable": {"thread_id": "fan"}}
    await graph.ainvoke({"items": list(range(6)), "squares": [], "answer": ""}, config)
    await graph.ainvoke(Command(resume="yes"), config)
    await graph.ainvoke({"items": [7], "squares": [], "answer": ""}, config)

    def plain(value: object) -> object:  # interrupt ids are random: compare their values
        if isinstance(value, list) and value and isinstance(value[0], Interrupt):
            return [item.value for item in value]
        return value

    return [
        (
            t.metadata["source"],
            t.metadata["step"],
            t.checkpoint["channel_values"],
            sorted((c, repr(plain(v))) for _, c, v in t.pending_writes or []),
        )
        async for t in saver.alist(config)
    ]


def test_a_graph_leaves_what_the_in_memory_saver_leaves(store_url: str) -> None:
    # Parallel tasks' writes race for the channel's head (the losers retry), the graph's
    # input is written before its checkpoint, an interrupt is answered: every checkpoint
    # and every pending write reads back as LangGraph's own InMemorySaver keeps them.
    async def histories() -> tuple[list[tuple[object, ...]], ...]:
        expected = await history_of(InMemorySaver())
        async with AsyncActaeSaver.from_url(store_url) as saver:
            mine = await history_of(saver)
        return expected, mine

    expected, mine = asyncio.run(histories())
    assert len(expected) == 7
    assert mine == expected
    if store_url == "memory://":
        return
    with ActaeSaver.from_url(store_url) as fresh:  # another process, as it reads the store
        config: RunnableConfig = {"configurable": {"thread_id": "fan"}}
        latest = fresh.get_tuple(config)
        assert latest is not None
        assert [c for _, c, _ in latest.pending_writes or []] == ["__interrupt__"]
        assert len(list(fresh.list(config))) == 7
