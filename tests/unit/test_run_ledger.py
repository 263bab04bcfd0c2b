"""A run's ledger is an object of its own: compared by identity, shown without the run."""

from __future__ import annotations

from typing import Any, cast

from actae.adapters.runtime.run_ledger import RunLedger


class Secret:
    """A stand-in for what a run holds (its result, its decisions)."""

    def __repr__(self) -> str:
        return "the run's contents"


GIVEN = cast(Any, Secret())


def ledger() -> RunLedger:
    return RunLedger(GIVEN, GIVEN, GIVEN, worker="w", redact=None, durably=GIVEN)


def test_a_ledger_s_repr_never_prints_the_run() -> None:
    assert "the run's contents" not in repr(ledger())


def test_two_ledgers_of_the_same_run_are_two_ledgers() -> None:
    assert ledger() != ledger()
