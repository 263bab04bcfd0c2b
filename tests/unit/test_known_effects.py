"""What a process remembers of the effects it holds (``domain/known_effects.py``)."""

from __future__ import annotations

from typing import Any

import actae
from actae.domain.known_effects import KnownEffects
from actae.domain.operation import Operation


def effect_events(store: actae.Store) -> list[Any]:
    """An effect's events as a worker writes them: register and claim, then two renewals."""
    written: list[Any] = []
    store.on_commit(written.extend)
    run = store.start_run("w", agent_id="x", state={})
    claim = store.claim("charge", run_id=run.run_id, worker="w1", lease=30.0, request={})
    for _ in range(2):
        store.heartbeat("charge", token=claim.token, worker="w1", lease=30.0)
    return [e for e in written if e.originator_id == Operation.id_for("charge")]


def test_an_effect_held_is_remembered_whole_and_a_gap_forgets_it() -> None:
    with actae.open("memory://") as store:
        registered, claimed, renewed, renewed_again = effect_events(store)
    effect_id = registered.originator_id
    known = KnownEffects()
    known.written([registered, claimed])
    known.written([renewed])
    remembered = known.effect(effect_id, registered.timestamp)
    assert remembered is not None
    assert (remembered.version, remembered.token, remembered.holder) == (3, 1, "w1")

    known.forget(effect_id)
    known.written([registered, claimed])
    known.written([renewed_again])  # version 4 after 2: another process wrote version 3
    assert known.effect(effect_id, registered.timestamp) is None


def test_a_settled_effect_is_forgotten_and_commands_are_never_remembered() -> None:
    with actae.open("memory://") as store:
        written: list[Any] = []
        store.on_commit(written.extend)
        run = store.start_run("w", agent_id="x", state={})
        store.record(run.channel_id, kind="k", payload={}, expected_cursor=1, operation_id="op")
        claim = store.claim("charge", run_id=run.run_id, worker="w1", lease=30.0, request={})
        held = len(store._service.core.effects)
        store.complete_effect("charge", token=claim.token, worker="w1", result={})
        assert (held, len(store._service.core.effects)) == (1, 0)
    known = KnownEffects()
    known.written(written)
    assert len(known) == 0
