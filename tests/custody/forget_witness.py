"""A second process that read a run before another process forgot it.

Usage: ``python forget_witness.py URL RUN_ID EFFECT_KEY ARTIFACT_REF_JSON``. Opens the store,
reads the run's state, events, effect result and artifact and writes a record to it (so
its caches hold the run's data key), prints ``warm`` and waits for a line on stdin: the
test forgets the run meanwhile, in its own process. Then it tries every read and write
again at once and prints one JSON line: per attempt, the error's class name (or ``ok``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from uuid import UUID

import actae
from tests.custody.forgetting import attempts


def main(url: str, run_id: str, effect_key: str, ref: str) -> None:
    with actae.open(url) as store:
        run = store.run(UUID(run_id))
        tries: dict[str, Callable[[], object]] = attempts(store, run, effect_key, json.loads(ref))
        for name, attempt in tries.items():
            if name not in ("record", "transition"):
                attempt()  # warm: every read works before the forget
        store.record(run.channel_id, kind="warm", payload={}, expected_cursor=run.cursor)
        print("warm", flush=True)
        sys.stdin.readline()
        outcome = {}
        for name, attempt in attempts(
            store, store.run(run.run_id), effect_key, json.loads(ref)
        ).items():
            try:
                attempt()
            except actae.ActaeError as error:
                outcome[name] = type(error).__name__
            else:
                outcome[name] = "ok"
        print(json.dumps(outcome), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:5])
