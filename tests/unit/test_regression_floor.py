"""The floor a read is checked against is what was seen before the read was sent.

In one process, one thread's write may commit while another thread's head read is on its
way: the read then answers the head as it was when it started, below the cursor just
written. That is no regression, and must not stop the process; a head below what was seen
*before* the read is one.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast
from uuid import UUID, uuid4

import pytest

import actae
from actae.domain.operation import Operation
from actae.domain.ports import EventLog, Request
from actae.domain.regression import SeenHistory, WatchedLog


@dataclass(frozen=True)
class Stored:
    """What the floor looks at of an event: its aggregate and version."""

    originator_id: UUID
    originator_version: int


class HeadAsItWas:
    """A log that answers the head ``version``; ``meanwhile`` runs while the read is away."""

    def __init__(self, version: int, meanwhile: Any = None) -> None:
        self.version = version
        self.meanwhile = meanwhile

    def stream(self, originator_id: UUID, **_: Any) -> Iterator[Any]:
        if self.meanwhile is not None:
            self.meanwhile()
        return iter([Stored(originator_id, self.version)])

    def together(self, requests: Sequence[Request]) -> list[list[Any]]:
        return [[Stored(cast(tuple[UUID, bool], r)[0], self.version)] for r in requests]

    def in_order(self, **_: Any) -> list[Any]:
        raise NotImplementedError


def watched(seen: SeenHistory, log: HeadAsItWas) -> WatchedLog:
    return WatchedLog(cast(EventLog, log), seen)


def test_a_write_committed_while_the_read_was_away_is_no_regression() -> None:
    seen, channel = SeenHistory(), uuid4()
    seen.saw([cast(Any, Stored(channel, 10))])

    def another_thread_writes() -> None:
        seen.saw([cast(Any, Stored(channel, 11))])

    log = watched(seen, HeadAsItWas(10, meanwhile=another_thread_writes))
    assert [e.originator_version for e in log.stream(channel, desc=True, limit=1)] == [10]
    assert seen.regressed is None


def test_a_head_below_what_was_seen_before_the_read_is_a_regression() -> None:
    seen, channel = SeenHistory(), uuid4()
    seen.saw([cast(Any, Stored(channel, 10))])

    with pytest.raises(actae.HistoryRegressedError) as caught:
        list(watched(seen, HeadAsItWas(9)).stream(channel, desc=True, limit=1))
    assert (caught.value.channel, caught.value.seen, caught.value.found) == (channel, 10, 9)
    assert seen.regressed is caught.value


def test_a_head_below_what_a_combined_read_saw_is_a_regression() -> None:
    seen, channel = SeenHistory(), uuid4()
    log = HeadAsItWas(5)
    watched(seen, log).together([(channel, True)])

    log.version = 3
    with pytest.raises(actae.HistoryRegressedError) as caught:
        list(watched(seen, log).stream(channel, desc=True, limit=1))
    assert (caught.value.seen, caught.value.found) == (5, 3)


AT = datetime(2026, 12, 2, tzinfo=UTC)


def plain(aggregate: UUID, version: int) -> Any:
    """An event that grants no fencing token (a channel's, or an effect's other than a claim)."""
    return Stored(aggregate, version)


def claimed(effect: UUID, version: int, token: int) -> Any:
    """The effect's claim at ``version``, granting ``token``."""
    return Operation.Claimed(
        originator_id=effect,
        originator_version=version,
        timestamp=AT,
        worker="w",
        token=token,
        expires_at=AT,
        in_doubt=False,
    )


def test_a_token_floor_survives_later_events() -> None:
    """A claim's outcome (no token of its own) must not lower the floor of the claim's token."""
    seen, effect = SeenHistory(), uuid4()
    seen.saw([plain(effect, 1), claimed(effect, 2, 1), plain(effect, 3)])
    seen.saw([claimed(effect, 4, 2), plain(effect, 5)])  # claimed again (token 2), then done
    assert seen.floor(effect) == (5, 2)

    without_the_second_claim = [
        plain(effect, 1),
        claimed(effect, 2, 1),
        *(plain(effect, v) for v in (3, 4, 5)),
    ]
    with pytest.raises(actae.HistoryRegressedError, match="fencing token"):
        seen.ensure_not_behind(without_the_second_claim, seen.floor(effect))


def test_a_floor_never_goes_back_on_an_older_window() -> None:
    seen, channel = SeenHistory(), uuid4()
    seen.saw([plain(channel, 3)])
    seen.saw([plain(channel, 1)])  # a windowed read of older events
    assert seen.floor(channel) == (3, 0)
