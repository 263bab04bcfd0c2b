"""A worker SIGKILLed inside a payment: nothing is re-sampled, nothing is charged twice."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import actae

HERE = Path(__file__).parent
spec = importlib.util.spec_from_file_location("provider", HERE / "provider.py")
assert spec is not None
assert spec.loader is not None
provider_module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(provider_module)


def later_clock(seconds: float) -> Callable[[], datetime]:
    """Wall time shifted forward, so leases granted by a dead worker have run out."""
    return lambda: datetime.now(UTC) + timedelta(seconds=seconds)


def must_not_run(*_: Any) -> Any:
    pytest.fail("a completed step or effect was run again")


def test_killed_worker_is_recovered_without_repeats(durable_url: str, tmp_path: Path) -> None:
    provider = provider_module.MockProvider(tmp_path / "provider.db")
    with actae.open(durable_url) as store:
        run = store.start_run("invoice-42", agent_id="payer", state={})
    worker = subprocess.Popen(
        [
            sys.executable,
            str(HERE / "crashing_worker.py"),
            durable_url,
            str(run.run_id),
            str(tmp_path / "provider.db"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert worker.stdout is not None
    sampled = float(worker.stdout.readline().split()[1])
    assert worker.stdout.readline().strip() == "charged"
    os.kill(worker.pid, signal.SIGKILL)
    assert worker.wait(timeout=30) == -signal.SIGKILL

    with actae.open(durable_url, clock=later_clock(120)) as store:
        (doubtful,) = store.recover(run.channel_id).outstanding
        assert doubtful.status is actae.EffectStatus.IN_DOUBT
        ctx = store.resume(run.run_id, worker="w2")

        assert ctx.step("sample", must_not_run) == sampled
        receipt = ctx.effect("charge", must_not_run, reconcile=provider.lookup)

        assert receipt == provider.lookup(doubtful.effect_key)
        assert (provider.charges(), provider.requests()) == (1, 1)
        info = store.effect(doubtful.effect_key)
        assert info.status is actae.EffectStatus.COMPLETED
        assert [(a.worker, a.outcome) for a in info.attempts] == [
            ("w1", "expired"),
            ("w2", "completed"),
        ]
        with pytest.raises(actae.FencingError):
            store.complete_effect(
                doubtful.effect_key, token=1, worker="w1", result={"charge_id": "late"}
            )
        assert store.recover(run.channel_id).outstanding == []
        again = store.resume(run.run_id, worker="w3")
        assert again.step("sample", must_not_run) == sampled
        assert again.effect("charge", must_not_run) == receipt
