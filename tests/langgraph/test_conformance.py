"""LangGraph's checkpointer conformance suite, on every backend: FULL, 8 of 8 capabilities.

The suite (``langgraph-checkpoint-conformance``) is async: ``validate`` takes a registered
async-generator factory, builds a fresh saver per capability, detects which capabilities
the saver implements (its overridden ``a*`` methods) and runs each one's spec against them.
Here a plain test runs it with ``asyncio.run`` and asserts the report.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES
from langgraph.checkpoint.conformance.report import CapabilityReport

import actae
from actae.langgraph import ActaeSaver, AsyncActaeSaver

Savers = Callable[[], AbstractAsyncContextManager[BaseCheckpointSaver[int]]]


def conformance(name: str, savers: Savers) -> CapabilityReport:
    """Run the whole suite against the savers ``savers()`` opens; its report."""

    @checkpointer_test(name=name)
    async def factory() -> AsyncIterator[BaseCheckpointSaver[int]]:
        async with savers() as saver:
            yield saver

    report = asyncio.run(validate(factory))
    report.print_report()  # shown with -s, or when the assertion below fails
    return report


def assert_full(report: CapabilityReport) -> None:
    failures = [f for result in report.results.values() for f in result.failures]
    passed = [name for name, result in report.results.items() if result.passed is True]
    detected = [name for name, result in report.results.items() if result.detected]
    assert report.conformance_level() == "FULL", failures
    assert sorted(passed) == sorted(detected) == sorted(c.value for c in ALL_CAPABILITIES)
    assert len(passed) == 8


def test_async_saver_conforms(store_url: str) -> None:
    @asynccontextmanager
    async def savers() -> AsyncIterator[AsyncActaeSaver]:
        async with AsyncActaeSaver.from_url(store_url) as saver:
            yield saver

    backend = store_url.split(":", maxsplit=1)[0]
    assert_full(conformance(f"AsyncActaeSaver on {backend}", savers))


def test_sync_saver_conforms(durable_url: str) -> None:
    # ActaeSaver's coroutines run its blocking methods in a thread: the suite drives the
    # synchronous driver through them.
    @asynccontextmanager
    async def savers() -> AsyncIterator[ActaeSaver]:
        with ActaeSaver.from_url(durable_url) as saver:
            yield saver

    assert_full(conformance("ActaeSaver", savers))


def test_a_saver_on_a_redacting_store_conforms() -> None:
    # redact=True walks every value before it is packed (issue 28, item 13): what the
    # suite stores has no secret in it, so it must read back exactly as it was put.
    @asynccontextmanager
    async def savers() -> AsyncIterator[AsyncActaeSaver]:
        async with actae.open_async("memory://", redact=True) as store:
            yield AsyncActaeSaver(store)

    assert_full(conformance("AsyncActaeSaver, redact=True", savers))
