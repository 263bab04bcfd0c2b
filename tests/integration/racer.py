"""A racer for the concurrency tests: transitions one channel as fast as it can.

Run as a script it is a separate process: it opens its own store, prints ``ready``, waits
for ``go`` on stdin, races, and prints one JSON line per attempt.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

import actae


def race(store: actae.Store, channel_id: str, name: str, attempts: int) -> list[dict[str, Any]]:
    """Try ``attempts`` transitions at the head; after each success, retry it stale once."""
    outcomes: list[dict[str, Any]] = []
    for i in range(attempts):
        head = store.head(channel_id)
        args: dict[str, Any] = {
            "kind": "step",
            "payload": {"by": name, "i": i},
            "state": {"by": name, "i": i},
            "expected_version": head.state_version,
            "expected_cursor": head.cursor,
            "operation_id": f"{name}:{i}",
        }
        try:
            receipt = store.transition(channel_id, **args)
        except actae.ConflictError as error:
            outcomes.append(
                {"op": args["operation_id"], "outcome": "conflict", "actual": error.actual_cursor}
            )
            continue
        outcomes.append(
            {
                "op": args["operation_id"],
                "outcome": "written",
                "cursor": receipt.cursor,
                "replayed": receipt.replayed,
            }
        )
        again = store.transition(channel_id, **args)  # a retry after a "lost" reply
        outcomes.append(
            {
                "op": args["operation_id"],
                "outcome": "retried",
                "cursor": again.cursor,
                "replayed": again.replayed,
            }
        )
    return outcomes


def main() -> None:
    url, channel_id, name, threads, attempts = sys.argv[1:6]
    results: list[dict[str, Any]] = []
    with actae.open(url) as store:
        print("ready", flush=True)
        if sys.stdin.readline().strip() != "go":
            raise SystemExit("expected 'go'")

        def run(index: int) -> None:
            results.extend(race(store, channel_id, f"{name}-t{index}", int(attempts)))

        workers = [threading.Thread(target=run, args=(i,)) for i in range(int(threads))]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    for outcome in results:
        print(json.dumps(outcome), flush=True)


if __name__ == "__main__":
    main()
