"""The two drivers: answer an operation's calls with a ``Store``, or with an async store.

Both walk the operation the same way (``_Walk``): send the last answer in, or throw the
last failure in, and see what it asks next. They differ only in how a call is answered,
``getattr(store, name)(...)`` or ``await getattr(store, name)(...)``, which is the point:
the translation of LangGraph's operations exists once (:mod:`~actae.adapters.langgraph.calls`).
An ``AsyncStore``'s coroutines have ``Store``'s names, arguments, results and errors.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from langgraph.checkpoint.base import CheckpointTuple

from actae.adapters.langgraph.calls import Call, Emit, Op, Stream
from actae.adapters.runtime.async_store import AsyncStore
from actae.adapters.runtime.store import Store

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class _Returned(Generic[T]):
    """The operation returned ``value``: the walk is over."""

    value: T


class _Walk(Generic[T]):
    """One operation being driven: it asks, a driver answers, until it returns."""

    def __init__(self, op: Generator[Call | Emit, Any, T]) -> None:
        self._op = op
        self._answer: object = None
        self._failure: Exception | None = None

    def next(self) -> Call | Emit | _Returned[T]:
        """What the operation asks next, or what it returned."""
        answer, failure = self._answer, self._failure
        self._answer, self._failure = None, None
        try:
            return self._op.send(answer) if failure is None else self._op.throw(failure)
        except StopIteration as done:
            return _Returned(done.value)

    def answer(self, value: object) -> None:
        """The store answered the last call with ``value``."""
        self._answer = value

    def fail(self, error: Exception) -> None:
        """The last call raised ``error``: it is thrown into the operation next."""
        self._failure = error

    def close(self) -> None:
        """Stop the operation (the caller stopped listening, or was cancelled)."""
        self._op.close()


def run(store: Store, op: Op[T]) -> T:
    """Drive ``op`` with blocking calls on ``store``; its answer."""
    walk = _Walk(op)
    try:
        while True:
            request = walk.next()
            if isinstance(request, _Returned):
                return request.value
            if isinstance(request, Call):
                _answer(walk, store, request)
    finally:
        walk.close()


def iterate(store: Store, stream: Stream) -> Iterator[CheckpointTuple]:
    """Drive ``stream`` with blocking calls on ``store``, yielding what it emits."""
    walk = _Walk(stream)
    try:
        while not isinstance(request := walk.next(), _Returned):
            if isinstance(request, Emit):
                yield request.item
            else:
                _answer(walk, store, request)
    finally:
        walk.close()


async def arun(store: AsyncStore, op: Op[T]) -> T:
    """Drive ``op`` by awaiting ``store``'s coroutines; its answer."""
    walk = _Walk(op)
    try:
        while True:
            request = walk.next()
            if isinstance(request, _Returned):
                return request.value
            if isinstance(request, Call):
                await _aanswer(walk, store, request)
    finally:
        walk.close()


async def aiterate(store: AsyncStore, stream: Stream) -> AsyncIterator[CheckpointTuple]:
    """Drive ``stream`` by awaiting ``store``'s coroutines, yielding what it emits."""
    walk = _Walk(stream)
    try:
        while not isinstance(request := walk.next(), _Returned):
            if isinstance(request, Emit):
                yield request.item
            else:
                await _aanswer(walk, store, request)
    finally:
        walk.close()


def _answer(walk: _Walk[Any], store: Store, call: Call) -> None:
    try:
        walk.answer(getattr(store, call.name)(*call.args, **call.kwargs))
    except Exception as error:  # thrown into the operation, which decides
        walk.fail(error)


async def _aanswer(walk: _Walk[Any], store: AsyncStore, call: Call) -> None:
    try:
        walk.answer(await getattr(store, call.name)(*call.args, **call.kwargs))
    except Exception as error:  # thrown into the operation, which decides
        walk.fail(error)
