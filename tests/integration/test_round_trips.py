"""A worker's ledger calls cost one round trip each on PostgreSQL.

A claim of a fresh key writes without reading (a key that exists makes the write fail),
and completing, failing or renewing an effect this process holds decides on what the
claim wrote (``domain/known_effects.py``): one statement each.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

import actae
from actae.adapters.persistence.postgres import ActaePostgresRecorder

pytestmark = pytest.mark.postgres


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The statements this thread sends (the notifier's own thread is not counted)."""
    sent: list[str] = []
    caller = threading.get_ident()

    def counting(original: Callable[..., Any]) -> Callable[..., Any]:
        def execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() == caller:
                sent.append(str(query)[:80])
            return original(self, query, *args, **kwargs)

        return execute

    monkeypatch.setattr(psycopg.Cursor, "execute", counting(psycopg.Cursor.execute))
    monkeypatch.setattr(psycopg.Connection, "execute", counting(psycopg.Connection.execute))
    # A write goes to libpq directly (``PQexecPrepared``), past psycopg's cursor.
    write = ActaePostgresRecorder._on_libpq
    monkeypatch.setattr(ActaePostgresRecorder, "_on_libpq", counting(write))
    return sent


def test_claim_then_complete_fail_or_renew_are_one_statement_each(
    pg_url: str, statements: list[str]
) -> None:
    with actae.open(pg_url) as store:
        run = store.start_run("w", agent_id="x", state={})
        for n, settle in enumerate(("complete", "fail", "heartbeat")):
            key = f"charge-{n}"
            statements.clear()
            claim = store.claim(key, run_id=run.run_id, worker="w1", lease=30.0, request={})
            assert len(statements) == 1, statements
            statements.clear()
            if settle == "complete":
                store.complete_effect(key, token=claim.token, worker="w1", result={"ok": True})
            elif settle == "fail":
                store.fail_effect(key, token=claim.token, worker="w1", error="declined")
            else:
                store.heartbeat(key, token=claim.token, worker="w1", lease=30.0)
            assert len(statements) == 1, (settle, statements)


def test_a_claim_on_a_run_this_process_has_not_seen_reads_nothing(
    pg_url: str, statements: list[str]
) -> None:
    with actae.open(pg_url) as store:
        run = store.start_run("w", agent_id="x", state={})
    with actae.open(pg_url) as store:
        store.start_run("other", agent_id="x", state={})  # the first write's own look-ups
        statements.clear()
        store.claim("charge", run_id=run.run_id, worker="w1", lease=30.0, request={})
        assert len(statements) == 1, statements  # the write, on the run's opening head guessed
        assert [e.effect_key for e in store.recover(run.channel_id).outstanding] == ["charge"]
