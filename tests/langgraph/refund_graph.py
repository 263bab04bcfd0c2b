"""A LangGraph graph that asks a person before it pays, run in a process of its own.

``python refund_graph.py start URL THREAD LOG`` runs it (``AsyncActaeSaver``) until it asks;
``python refund_graph.py resume URL THREAD LOG ANSWER`` answers from another process
(``ActaeSaver``) and runs it to the end. Each node appends its name to the file ``LOG`` when
it runs, so the test can count. The last line printed is JSON: what the run returned.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from actae.langgraph import ActaeSaver, AsyncActaeSaver


class Refund(TypedDict):
    """The graph's state."""

    amount: int
    approved: str
    paid: bool


def builder(log: Path) -> StateGraph[Refund]:
    """quote (expensive: must run once) -> approve (asks a person) -> pay."""

    def ran(node: str) -> None:
        with log.open("a") as lines:
            lines.write(node + "\n")

    def quote(state: Refund) -> dict[str, Any]:
        ran("quote")
        return {"amount": 120}

    def approve(state: Refund) -> dict[str, Any]:
        answer = interrupt({"question": f"refund {state['amount']}?"})
        ran("approve")
        return {"approved": answer}

    def pay(state: Refund) -> dict[str, Any]:
        ran("pay")
        return {"paid": state["approved"] == "yes"}

    graph = StateGraph(Refund)
    graph.add_node("quote", quote)
    graph.add_node("approve", approve)
    graph.add_node("pay", pay)
    graph.add_edge(START, "quote")
    graph.add_edge("quote", "approve")
    graph.add_edge("approve", "pay")
    graph.add_edge("pay", END)
    return graph


def config(thread_id: str) -> RunnableConfig:
    """The thread, and the agent its Actae run is for."""
    return {"configurable": {"thread_id": thread_id}, "metadata": {"agent_id": "refunds"}}


async def start(url: str, thread_id: str, log: Path) -> dict[str, Any]:
    """Run until the graph asks; what it asked."""
    async with AsyncActaeSaver.from_url(url) as saver:
        graph = builder(log).compile(checkpointer=saver)
        result = await graph.ainvoke(
            {"amount": 0, "approved": "", "paid": False}, config(thread_id)
        )
        return {"asked": [i.value for i in result["__interrupt__"]]}


def resume(url: str, thread_id: str, log: Path, answer: str) -> dict[str, Any]:
    """Answer the question and run to the end; the final state."""
    with ActaeSaver.from_url(url) as saver:
        graph = builder(log).compile(checkpointer=saver)
        result = graph.invoke(Command(resume=answer), config(thread_id))
        return {"state": result}


if __name__ == "__main__":
    command, url, thread_id, log = sys.argv[1:5]
    if command == "start":
        outcome = asyncio.run(start(url, thread_id, Path(log)))
    else:
        outcome = resume(url, thread_id, Path(log), sys.argv[5])
    print(json.dumps(outcome))
