"""State-schema migrations apply to the state they were computed from, one schema at a time.

A migration computed from a stale state (another worker migrated first and the run went on)
must be refused: accepting it would roll the state back to its pre-migration copy.
"""

from __future__ import annotations

from typing import Any

import pytest

import actae
from actae.domain import lifecycle


def test_a_stale_migration_is_refused_and_never_rolls_the_state_back(
    store: actae.Store,
) -> None:
    run = store.start_run("mig", agent_id="a", state={"paid": False}, pins={"schema": 1})
    other_worker_done: list[bool] = []

    def migrate_while_another_worker_wins(old: dict[str, Any]) -> dict[str, Any]:
        """Worker B's migration; worker A migrates and records a payment meanwhile."""
        if not other_worker_done:
            other_worker_done.append(True)
            ctx = store.resume(run.run_id, worker="A", pins={"schema": 2}, migrations={1: dict})
            ctx.transition(state={"paid": True})
        return {**old, "migrated_by": "B"}

    ctx_b = store.resume(
        run.run_id,
        worker="B",
        pins={"schema": 2},
        migrations={1: migrate_while_another_worker_wins},
    )

    assert store.state_at(run.channel_id).state == {"paid": True}
    assert ctx_b.run.pins["schema"] == 2
    migrations = [e for e in store.events(run.channel_id) if e.kind == "state.migrated"]
    assert [e.contents()["actor"] for e in migrations] == ["A"]


def test_the_domain_refuses_a_migration_from_the_wrong_schema_or_cursor(
    store: actae.Store,
) -> None:
    run = store.start_run("mig2", agent_id="a", state={"n": 1}, pins={"schema": 1})

    def migrate(**fields: Any) -> actae.RunInfo:
        """The guard, below the façade (resume computes these fields itself)."""
        return lifecycle.migrate(store._service, run.run_id, **fields)

    migrate(from_schema=1, to_schema=2, state={"n": 2}, actor="A", expected_cursor=1)
    before = store.events(run.channel_id)

    with pytest.raises(actae.IllegalTransitionError, match="schema 2"):
        migrate(from_schema=1, to_schema=2, state={"n": 0}, actor="B", expected_cursor=2)
    with pytest.raises(actae.ConflictError) as moved:
        migrate(from_schema=2, to_schema=3, state={"n": 0}, actor="B", expected_cursor=1)
    with pytest.raises(actae.ValidationError, match="one schema at a time"):
        migrate(from_schema=2, to_schema=4, state={"n": 0}, actor="B", expected_cursor=2)

    assert (moved.value.expected_cursor, moved.value.actual_cursor) == (1, 2)
    assert store.events(run.channel_id) == before
    assert store.run(run.run_id).pins["schema"] == 2


def test_a_chain_of_migrations_runs_one_schema_at_a_time(store: actae.Store) -> None:
    run = store.start_run("chain", agent_id="a", state={"basket": ["gpu"]}, pins={"schema": 1})

    ctx = store.resume(
        run.run_id,
        worker="w",
        pins={"schema": 3},
        migrations={
            1: lambda s: {"items": s["basket"]},
            2: lambda s: {"items": [{"sku": item} for item in s["items"]]},
        },
    )

    assert ctx.run.pins["schema"] == 3
    assert store.state_at(run.channel_id).state == {"items": [{"sku": "gpu"}]}
    steps = [
        (e.contents()["from_schema"], e.contents()["to_schema"])
        for e in store.events(run.channel_id)
        if e.kind == "state.migrated"
    ]
    assert steps == [(1, 2), (2, 3)]
    assert store.state_at(run.channel_id, cursor=2).state == {"items": ["gpu"]}
