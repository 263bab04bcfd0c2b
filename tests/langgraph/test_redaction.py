"""``redact=True`` reaches inside what the LangGraph saver packs (issue 28, item 13).

A node returns an API key, in the graph's state and in a message. LangGraph hands the saver
the node's writes and then a checkpoint holding them; both are stored as serde blobs
(base64 of msgpack), which the store's redactor cannot read. The saver redacts the values
before it packs them: no stored row holds the key, not even inside a decoded blob, and the
records count what was removed. A value the redactor cannot look inside (bytes) is refused
with a ValidationError naming its channel, and nothing of it is written.
"""

from __future__ import annotations

import asyncio
import base64
import operator
from collections.abc import Iterator
from typing import Annotated, Any, TypedDict

import orjson
import pytest
from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

import actae
from actae.adapters.langgraph.encoding import CHECKPOINT, WRITES
from actae.langgraph import ActaeSaver, AsyncActaeSaver
from tests.custody.sealed import raw_event_bodies, schema_of
from tests.langgraph.test_graphs import history_of

API_KEY = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7dEf0h"  # made up, not live
RAW = b"\x00\x01opaque-" + API_KEY.encode()


class Lookup(TypedDict):
    customer: str
    key: str
    messages: Annotated[list[AnyMessage], add_messages]
    blobs: Annotated[list[Any], operator.add]


def lookup_graph(*, opaque: bool = False) -> StateGraph[Lookup]:
    """fetch (returns the key, or bytes holding it) -> answer."""

    def fetch(state: Lookup) -> dict[str, Any]:
        if opaque:
            return {"blobs": [RAW]}
        return {"key": API_KEY, "messages": [AIMessage(content=f"your key is {API_KEY}")]}

    def answer(state: Lookup) -> dict[str, Any]:
        return {"customer": "ada"}

    graph = StateGraph(Lookup)
    graph.add_node("fetch", fetch)
    graph.add_node("answer", answer)
    graph.add_edge(START, "fetch")
    graph.add_edge("fetch", "answer")
    graph.add_edge("answer", END)
    return graph


def config(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


def start() -> Lookup:
    return {"customer": "", "key": "", "messages": [], "blobs": []}


def stored_texts(url: str) -> Iterator[bytes]:
    """Every stored event body, and the decoded bytes of every serde blob inside it."""
    schema = None if url.startswith("sqlite") else schema_of(url)
    for body in raw_event_bodies(url, schema):
        yield body
        yield from _blobs(orjson.loads(body))


def _blobs(value: object) -> Iterator[bytes]:
    if isinstance(value, dict):
        if value.keys() == {"type", "data"} and isinstance(value["data"], str):
            yield base64.b64decode(value["data"])
        for item in value.values():
            yield from _blobs(item)
    elif isinstance(value, list):
        for item in value:
            yield from _blobs(item)


def test_a_key_a_node_returns_is_redacted_inside_writes_and_checkpoints(
    durable_url: str,
) -> None:
    with actae.open(durable_url, redact=True) as store:
        saver = ActaeSaver(store)
        graph = lookup_graph().compile(checkpointer=saver)
        graph.invoke(start(), config("t-1"))
        latest = saver.get_tuple(config("t-1"))
        run = saver.thread_run("t-1")
        assert latest is not None
        assert run is not None
        events = store.events(run.channel_id)

    for text in stored_texts(durable_url):  # raw SQL on the store's events table
        assert API_KEY.encode() not in text
    values = latest.checkpoint["channel_values"]
    assert values["key"] == "[redacted:api_key]"
    assert values["messages"][0].content == "your key is [redacted:api_key]"
    assert values["customer"] == "ada"
    # fetch's writes (the key, and the message that quotes it): one record counts both
    assert [e.redacted for e in events if e.kind == WRITES and e.redacted] == [{"api_key": 2}]
    counted = [(e.payload or {}).get("redacted") for e in events if e.kind == CHECKPOINT]
    assert {"api_key": 2} in counted  # the checkpoints that hold the key say so


def test_a_value_the_redactor_cannot_look_inside_is_refused_and_not_written(
    durable_url: str,
) -> None:
    with actae.open(durable_url, redact=True) as store:
        graph = lookup_graph(opaque=True).compile(checkpointer=ActaeSaver(store))
        with pytest.raises(actae.ValidationError) as refused:
            graph.invoke(start(), config("t-2"))

    assert refused.value.field.startswith("langgraph.writes.blobs")
    assert "cannot look inside" in str(refused.value)
    assert "builtins.bytes" in str(refused.value)
    for text in stored_texts(durable_url):
        assert b"opaque-" not in text


def test_without_redact_the_saver_packs_what_it_is_given(durable_url: str) -> None:
    with actae.open(durable_url) as store:
        saver = ActaeSaver(store)
        lookup_graph(opaque=True).compile(checkpointer=saver).invoke(start(), config("t-3"))
        latest = saver.get_tuple(config("t-3"))

    assert latest is not None
    assert latest.checkpoint["channel_values"]["blobs"] == [RAW]


def test_a_graph_with_sends_and_interrupts_reads_back_the_same_under_redact(
    store_url: str,
) -> None:
    # Nothing secret in it: walking Send, Interrupt and the messages changes nothing, and the
    # history reads back exactly as LangGraph's own InMemorySaver keeps it.
    async def histories() -> tuple[list[tuple[object, ...]], ...]:
        expected = await history_of(InMemorySaver())
        async with actae.open_async(store_url, redact=True) as store:
            mine = await history_of(AsyncActaeSaver(store))
        return expected, mine

    expected, mine = asyncio.run(histories())
    assert mine == expected
