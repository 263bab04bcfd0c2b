"""``actae worker`` on a host whose clock is wrong: ``skewed_worker.py SECONDS <worker args>``.

Patches the library's single read of this host's wall clock to run SECONDS ahead (negative:
behind), then runs the worker command line as ``actae worker <worker args>`` would.
"""

from __future__ import annotations

import sys
from datetime import timedelta

import actae.adapters.persistence.clock
from actae.adapters.cli.main import main


def skew_wall_clock(seconds: float) -> None:
    real = actae.adapters.persistence.clock.wall_clock
    actae.adapters.persistence.clock.wall_clock = lambda: real() + timedelta(seconds=seconds)


if __name__ == "__main__":
    skew_wall_clock(float(sys.argv[1]))
    raise SystemExit(main(["worker", *sys.argv[2:]]))
