"""The contract runs twice on every backend: through ``Store`` and through ``AsyncStore``.

The cases are written once, against ``Store``'s interface. The ``async`` variant of the
``store`` fixture is :class:`tests.async_facade.BlockingAsyncStore`, which sends each call to
``AsyncStore``'s coroutine of the same name on an event loop and waits for it; so every case
also holds the async path to the same results and errors.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import actae
from tests.async_facade import BlockingAsyncStore


@pytest.fixture(params=["sync", "async"])
def store(
    request: pytest.FixtureRequest, store_url: str, clock: actae.ManualClock
) -> Iterator[Any]:
    """An open store on each backend and manual clock, through each face."""
    if request.param == "sync":
        with actae.open(store_url, clock=clock) as opened:
            yield opened
    else:
        with BlockingAsyncStore(store_url, clock=clock) as blocking:
            yield blocking
