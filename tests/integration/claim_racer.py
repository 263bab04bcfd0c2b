"""A claimant for the claim race: several threads in one process, each claiming once.

Prints ``ready``, waits for ``go`` on stdin, then one JSON line per thread.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

import actae


def claim_once(store: actae.Store, key: str, run_id: str, worker: str) -> dict[str, Any]:
    """Try to claim; report ``granted`` with the token, or the refusal."""
    try:
        claim = store.claim(key, run_id=run_id, worker=worker, lease=300.0, request={"amount": 100})
    except actae.LeaseHeldError as error:
        return {"worker": worker, "outcome": "lease_held", "holder": error.holder}
    return {"worker": worker, "outcome": claim.status, "token": claim.token}


def main() -> None:
    url, key, run_id, name, threads = sys.argv[1:6]
    results: list[dict[str, Any]] = []
    with actae.open(url) as store:
        print("ready", flush=True)
        sys.stdin.readline()
        workers = [
            threading.Thread(
                target=lambda i=i: results.append(claim_once(store, key, run_id, f"{name}-{i}"))
            )
            for i in range(int(threads))
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    for result in results:
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
