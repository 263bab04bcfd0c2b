"""8 threads and 2 processes race for one claim: exactly one is granted (SQLite, PostgreSQL)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import actae

RACER = Path(__file__).with_name("claim_racer.py")
spec = importlib.util.spec_from_file_location("actae_test_claim_racer", RACER)
assert spec is not None
assert spec.loader is not None
racer = importlib.util.module_from_spec(spec)
spec.loader.exec_module(racer)


def test_exactly_one_claim_is_granted(durable_url: str) -> None:
    with actae.open(durable_url) as store:
        run = store.start_run("race", agent_id="a", state={})
    key, run_id = "race:charge", str(run.run_id)
    processes = [
        subprocess.Popen(
            [sys.executable, str(RACER), durable_url, key, run_id, f"p{n}", "2"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(2)
    ]
    for process in processes:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "ready"
    outcomes: list[dict[str, Any]] = []
    with actae.open(durable_url) as store:
        barrier = threading.Barrier(9)

        def thread(i: int) -> None:
            barrier.wait(timeout=30)
            outcomes.append(racer.claim_once(store, key, run_id, f"t{i}"))

        threads = [threading.Thread(target=thread, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for process in processes:
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()
        barrier.wait(timeout=30)
        for t in threads:
            t.join(timeout=120)
        for process in processes:
            out, _ = process.communicate(timeout=120)
            assert process.returncode == 0
            outcomes.extend(json.loads(line) for line in out.splitlines())

        granted = [o for o in outcomes if o["outcome"] == "granted"]
        assert len(outcomes) == 12
        assert len(granted) == 1, outcomes
        assert granted[0]["token"] == 1
        assert all(o["holder"] == granted[0]["worker"] for o in outcomes if o is not granted[0])
        info = store.effect(key)
        assert (info.holder, info.token, len(info.attempts)) == (granted[0]["worker"], 1, 1)
        notes = [e for e in store.events(run.channel_id) if e.kind == "effect.claimed"]
        assert len(notes) == 1
