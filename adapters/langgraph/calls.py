"""What a saver operation asks of the store: the operation is a generator of calls.

Every LangGraph operation (``put``, ``get_tuple``, ``delete_thread``, ...) is written once, as
a generator that *yields* :class:`Call` requests (a ``Store`` method's name and arguments)
and receives their results; a failed call is thrown into it at the ``yield``, so it handles
a ``ConflictError`` where the store raised it. It never does IO itself. The synchronous
saver answers each call with ``getattr(store, name)(...)``, the asynchronous one with
``await getattr(async_store, name)(...)`` (:mod:`~actae.adapters.langgraph.drivers`): the
same translation serves both, and neither driver holds a rule of its own. This is the
shape of Actae's own command core (``domain/plan.py``), for the same reason.

``list`` also hands results out one at a time (:class:`Emit`), so a caller that stops early
never makes the store calls for the checkpoints it did not take.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from langgraph.checkpoint.base import CheckpointTuple

if TYPE_CHECKING:
    from actae.adapters.runtime.store import Store

T = TypeVar("T")
P = ParamSpec("P")


@dataclass(frozen=True, slots=True)
class Call:
    """Ask the store: the answer is ``store.<name>(*args, **kwargs)`` (awaited if async)."""

    name: str
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Emit:
    """Hand one checkpoint tuple to the caller of ``list``; nothing is sent back."""

    item: CheckpointTuple


Op = Generator[Call, Any, T]
"""An operation as the store calls it makes; its return value is its answer."""

Stream = Generator[Call | Emit, Any, None]
"""An operation that hands out results as it goes (``list``)."""


def ask(method: Callable[Concatenate[Store, P], T], *args: P.args, **kwargs: P.kwargs) -> Op[T]:
    """The store's answer to ``method(store, *args, **kwargs)``.

    ``method`` is named through the synchronous ``Store`` (``ask(Store.head, channel_id)``)
    so that mypy checks the arguments and knows the result's type; only its name travels,
    so the asynchronous store's coroutine of the same name answers it just as well.
    """
    answer: T = yield Call(method.__name__, args, kwargs)
    return answer
