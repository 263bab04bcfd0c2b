"""``make mutants``: weaken each guard in a copy of the tree and check that a test notices.

A guarantee is proven only by a test that fails without it. Each mutation below removes or
weakens one guard (a version check, a fingerprint part, a fence, a lock, a limit); the script
copies the working tree to a temporary folder, applies the one change there, runs the test
files that should notice (memory and SQLite; PostgreSQL too where the guard only exists
there) and reports the mutant *killed* (a test failed) or *survived*.

The source tree is never edited: others may be working in it. A mutation whose original
snippet is no longer found exactly once stops the run (exit 2), so the list follows the code.
A mutant that survives without an explanation in ``survives`` fails the run (exit 1), as does
an unmutated copy whose tests do not pass.

Usage: ``.venv/bin/python -m tests.mutants [--jobs N] [--list] [NAME ...]`` (``make mutants``)
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from subprocess import PIPE

from tests.mutant_cases import MUTANTS as STORE_MUTANTS
from tests.mutant_cases import Mutant
from tests.mutant_cases_custody import CUSTODY_MUTANTS
from tests.mutant_cases_faults import FAULT_MUTANTS

MUTANTS = [*STORE_MUTANTS, *FAULT_MUTANTS, *CUSTODY_MUTANTS]

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 300.0
IGNORED = shutil.ignore_patterns(
    ".venv",
    ".git",
    "build",
    "*.egg-info",
    "__pycache__",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    ".hypothesis",
    "benchmarks",
)


@dataclass(frozen=True)
class Outcome:
    """What the tests said about one mutant."""

    mutant: Mutant
    status: str  # killed | survived | timeout | error
    seconds: float
    detail: str


def problems_with_snippets(mutants: list[Mutant]) -> list[str]:
    """Mutations whose original text is not found exactly once in the working tree."""
    problems = []
    for mutant in mutants:
        count = (ROOT / mutant.path).read_text().count(mutant.original)
        if count != 1:
            problems.append(f"{mutant.name}: {mutant.path} holds the snippet {count} times")
    return problems


def copy_tree(dest: Path) -> None:
    """The working tree at ``dest``, importable as ``actae`` with its three layers inside."""
    shutil.copytree(ROOT, dest, ignore=IGNORED, symlinks=True)
    for layer in ("domain", "projections", "adapters"):
        (dest / "actae" / layer).symlink_to(Path("..") / layer)


def pytest_run(copy: Path, tests: tuple[str, ...], *, postgres: bool) -> tuple[str, str]:
    """Run ``tests`` in ``copy``: (``passed`` | ``failed`` | ``timeout`` | ``error``, detail)."""
    marker = [] if postgres else ["-m", "not postgres"]
    # PYTHONPATH makes subprocesses (racers, workers, the CLI) import the copy too; CI=true
    # makes PostgreSQL tests fail instead of skipping when the server is down.
    env = {**os.environ, "PYTHONPATH": str(copy), "CI": "true"}
    command = [sys.executable, "-m", "pytest", *tests, "-q", "-x", "--tb=line"]
    command += ["-p", "no:cacheprovider", *marker]
    # Its own session, so a hang is ended with everything it started (racers, projectors).
    with subprocess.Popen(
        command, cwd=copy, env=env, stdout=PIPE, stderr=PIPE, text=True, start_new_session=True
    ) as pytest:
        try:
            stdout, stderr = pytest.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(pytest.pid, signal.SIGKILL)
            pytest.communicate()
            return "timeout", f"no answer within {TIMEOUT:.0f} s"
    failed = [line for line in stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
    if pytest.returncode == 0:
        return "passed", ""
    if pytest.returncode == 1 and failed:
        return "failed", failed[0].split(" - ")[0].split(" ", 1)[1]
    tail = (stdout + stderr).strip().splitlines()[-3:]
    return "error", f"pytest exited {pytest.returncode}: " + " | ".join(tail)


def run_mutant(mutant: Mutant) -> Outcome:
    """Apply ``mutant`` to a fresh copy and run its tests there."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"actae-mutant-{mutant.name}-") as folder:
        copy = Path(folder) / "tree"
        copy_tree(copy)
        target = copy / mutant.path
        source = target.read_text()
        if source.count(mutant.original) != 1:  # the file changed since the snippets' check
            return Outcome(mutant, "error", 0.0, "snippet not found once in the copy")
        target.write_text(source.replace(mutant.original, mutant.replacement))
        result, detail = pytest_run(copy, mutant.tests, postgres=mutant.postgres)
    status = {"passed": "survived", "failed": "killed"}.get(result, result)
    if result == "timeout":
        status = "killed"  # a hang the tests notice is a kill; the detail says so
    return Outcome(mutant, status, time.monotonic() - started, detail)


def baseline(mutants: list[Mutant]) -> list[str]:
    """Failures of the unmutated copy: a mutant 'killed' by a broken test proves nothing."""
    failures = []
    with tempfile.TemporaryDirectory(prefix="actae-mutant-baseline-") as folder:
        copy = Path(folder) / "tree"
        copy_tree(copy)
        everything = tuple(sorted({t for m in mutants for t in m.tests}))
        on_postgres = tuple(sorted({t for m in mutants if m.postgres for t in m.tests}))
        runs = [(everything, False)] + ([(on_postgres, True)] if on_postgres else [])
        for tests, postgres in runs:
            result, detail = pytest_run(copy, tests, postgres=postgres)
            if result != "passed":
                failures.append(f"{result}: {detail}")
    return failures


def report(outcomes: list[Outcome], seconds: float) -> int:
    """Print the table and the kill rate; the exit status."""
    print(f"{'mutant':<31} {'file':<24} {'result':<9} {'secs':>5}  detail")
    for o in outcomes:
        detail = o.detail if o.status != "survived" else (o.mutant.survives or "UNEXPLAINED")
        print(f"{o.mutant.name:<31} {o.mutant.path:<24} {o.status:<9} {o.seconds:5.1f}  {detail}")
    killed = sum(o.status == "killed" for o in outcomes)
    print(f"\nkilled {killed} of {len(outcomes)} ({100 * killed / max(len(outcomes), 1):.0f} %)")
    print(f"in {seconds:.0f} s")
    bad = [
        o
        for o in outcomes
        if o.status == "error" or (o.status == "survived" and not o.mutant.survives)
    ]
    for o in bad:
        print(f"NOT OK {o.mutant.name}: {o.status}; guard: {o.mutant.why}")
    return 1 if bad else 0


def main() -> int:
    """Check the snippets, run the unmutated copy, then every mutant."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="run only these mutants")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--no-baseline", action="store_true", help="skip the unmutated run")
    args = parser.parse_args()
    chosen = [m for m in MUTANTS if not args.names or m.name in args.names]
    unknown = set(args.names) - {m.name for m in MUTANTS}
    if unknown:
        print(f"unknown mutants: {sorted(unknown)}", file=sys.stderr)
        return 2
    if args.list:
        for m in chosen:
            print(f"{m.name:<31} {m.path:<24} {m.why}")
        return 0
    problems = problems_with_snippets(MUTANTS)
    if problems:
        print("the mutation list no longer matches the code:", *problems, sep="\n  ")
        return 2
    started = time.monotonic()
    if not args.no_baseline:
        failures = baseline(chosen)
        if failures:
            print("the unmutated tree fails its tests:", *failures, sep="\n  ")
            return 1
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        outcomes = list(pool.map(run_mutant, chosen))
    return report(outcomes, time.monotonic() - started)


if __name__ == "__main__":
    sys.exit(main())
