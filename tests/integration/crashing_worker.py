"""A worker that samples a value with ``step``, then dies inside a payment ``effect``.

Run as a script: it prints ``sampled <value>``, then ``charged`` once the provider accepted
the charge, and then waits to be SIGKILLed by the test.
"""

from __future__ import annotations

import importlib.util
import random
import signal
import sys
from pathlib import Path

import actae

spec = importlib.util.spec_from_file_location("provider", Path(__file__).with_name("provider.py"))
assert spec is not None
assert spec.loader is not None
provider_module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(provider_module)


def main() -> None:
    url, run_id, provider_path = sys.argv[1:4]
    provider = provider_module.MockProvider(Path(provider_path))
    with actae.open(url) as store:
        ctx = store.resume(run_id, worker="w1")
        value = ctx.step("sample", random.random)
        print(f"sampled {value!r}", flush=True)

        def charge(key: str, token: int) -> dict[str, object]:
            receipt: dict[str, object] = provider.charge(key, 100, token)
            print("charged", flush=True)
            signal.pause()  # the provider has charged; we die before telling the store
            return receipt

        ctx.effect("charge", charge, lease=30.0)


if __name__ == "__main__":
    main()
