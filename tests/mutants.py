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

Usage: ``.venv/bin/python tests/mutants.py [--jobs N] [--list] [NAME ...]``
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

CHANNEL = ("tests/unit/test_channel.py", "tests/contract/test_runs_and_transitions.py")
IDEMPOTENCY = ("tests/contract/test_idempotency.py", "tests/contract/test_fingerprints.py")
FORK = ("tests/contract/test_fork.py", "tests/contract/test_fingerprints.py")
LEDGER = (
    "tests/contract/test_ledger.py",
    "tests/contract/test_fencing.py",
    "tests/unit/test_retry_policy.py",
)
LIMITS = ("tests/contract/test_bad_input.py", "tests/contract/test_limits.py")
PROJECTION = (
    "tests/contract/test_projections.py",
    "tests/integration/test_projection_exactly_once.py",
)
LEASES = ("tests/contract/test_run_leases.py", "tests/contract/test_worker.py")
FORK_REPLAY = ("tests/contract/test_fork_replay.py",)
OPERATOR = ("tests/contract/test_operator_actions.py",)
MIGRATIONS = ("tests/contract/test_migrations_guarded.py",)
STEPS = ("tests/contract/test_step_retries.py",)
WORKER = ("tests/contract/test_worker_stalls.py", "tests/contract/test_read_model_freshness.py")


@dataclass(frozen=True)
class Mutant:
    """One weakened guard: where, what it was, what it becomes, and why it matters."""

    name: str
    path: str
    original: str
    replacement: str
    why: str
    tests: tuple[str, ...]
    postgres: bool = False
    survives: str | None = None
    """Why no test kills it, for a mutant that is known to survive (README "Testing")."""


MUTANTS = [
    # -- optimistic concurrency -----------------------------------------------------------
    Mutant(
        "cursor-guard",
        "domain/channel.py",
        "if version_moved or expected_cursor != self.originator_version:",
        "if version_moved:",
        "a writer that saw an older head must be refused, not appended after the new one",
        CHANNEL,
    ),
    Mutant(
        "version-guard",
        "domain/channel.py",
        "version_moved = expected_version is not None and expected_version != self.state_version",
        "version_moved = False",
        "a transition built on another state version must be refused",
        CHANNEL,
    ),
    Mutant(
        "head-cache-never-back",
        "domain/heads.py",
        "if known is not None and known.originator_version >= event.originator_version:",
        "if False:",
        "a late reader must not replace a newer remembered head with an older one",
        ("tests/unit/test_channel.py", "tests/contract/test_two_writers.py"),
    ),
    # -- idempotency: what an operation's fingerprint covers ------------------------------
    Mutant(
        "transition-fingerprint-state",
        "domain/service.py",
        'fingerprint("transition", str(cid), kind, body.checksum, document.checksum)',
        'fingerprint("transition", str(cid), kind, body.checksum)',
        "a retry with another state must be refused, not replayed as if it were the same step",
        IDEMPOTENCY,
    ),
    Mutant(
        "transition-fingerprint-payload",
        "domain/service.py",
        'fingerprint("transition", str(cid), kind, body.checksum, document.checksum)',
        'fingerprint("transition", str(cid), kind, document.checksum)',
        "a retry with another payload must be refused",
        IDEMPOTENCY,
    ),
    Mutant(
        "transition-fingerprint-channel",
        "domain/service.py",
        'fingerprint("transition", str(cid), kind, body.checksum, document.checksum)',
        'fingerprint("transition", kind, body.checksum, document.checksum)',
        "an operation id reused on another channel must be refused",
        IDEMPOTENCY,
    ),
    Mutant(
        "record-fingerprint-usage",
        "domain/service.py",
        "usage_part = (str(sorted(spent.items())),) if spent else ()",
        "usage_part = ()",
        "a repeated record with other usage would replay and the budget would count the wrong one",
        IDEMPOTENCY,
    ),
    Mutant(
        "start-fingerprint-pins",
        "domain/starting.py",
        "            self._canonical_text(valid_pins.as_dict()),\n",
        "",
        "a start repeated with other pins (another model) must be refused",
        IDEMPOTENCY,
    ),
    Mutant(
        "start-fingerprint-parent",
        "domain/starting.py",
        "            str(parent),\n",
        "",
        "a start repeated under another parent must be refused",
        IDEMPOTENCY,
    ),
    Mutant(
        "start-fingerprint-budget",
        "domain/starting.py",
        "*((str(sorted(limits.items())),) if limits else ()),",
        "",
        "a start repeated with another budget must be refused",
        IDEMPOTENCY,
    ),
    Mutant(
        "fork-fingerprint-reason",
        "domain/forking.py",
        '"fork", str(cid), str(at), str(reason), self._canonical_text(overrides.as_dict())',
        '"fork", str(cid), str(at), self._canonical_text(overrides.as_dict())',
        "a fork repeated with another reason must be refused, or the receipt lies about why",
        FORK,
    ),
    Mutant(
        "fork-fingerprint-pins",
        "domain/forking.py",
        '"fork", str(cid), str(at), str(reason), self._canonical_text(overrides.as_dict())',
        '"fork", str(cid), str(at), str(reason)',
        "a fork repeated with other pins (another model) must be refused",
        FORK,
    ),
    Mutant(
        "fork-fingerprint-boundary",
        "domain/forking.py",
        '"fork", str(cid), str(at), str(reason), self._canonical_text(overrides.as_dict())',
        '"fork", str(cid), str(reason), self._canonical_text(overrides.as_dict())',
        "a fork repeated from another cursor must be refused",
        FORK,
    ),
    Mutant(
        "operation-ensure-same",
        "domain/operation.py",
        "if fingerprint != self.fingerprint:",
        "if False:",
        "an operation id reused for other content must be refused",
        IDEMPOTENCY,
    ),
    Mutant(
        "effect-fingerprint-request",
        "domain/ledger.py",
        'fingerprint("effect", str(run), body.checksum)',
        'fingerprint("effect", str(run))',
        "an effect key reused for another request (another amount) must be refused",
        LEDGER,
    ),
    # -- ledger: fencing, leases, in doubt, retries ---------------------------------------
    Mutant(
        "fence-above",
        "domain/operation.py",
        "if token != self.token:",
        "if token < self.token:",
        "a token the ledger never issued (above the current one) must be fenced like a stale one",
        LEDGER,
    ),
    Mutant(
        "fence-below",
        "domain/operation.py",
        "if token != self.token:",
        "if token > self.token:",
        "a stale holder's late completion must be fenced",
        LEDGER,
    ),
    Mutant(
        "effect-lease-held",
        "domain/operation.py",
        "        if status is EffectStatus.CLAIMED:\n"
        "            raise self._lease_held(now)\n"
        "        if self.retry_at",
        "        if self.retry_at",
        "a live claim keeps every other worker out",
        LEDGER,
    ),
    Mutant(
        "effect-lease-expiry-boundary",
        "domain/operation.py",
        "live = self.expires_at is not None and now < self.expires_at",
        "live = self.expires_at is not None and now <= self.expires_at",
        "a lease is over at its expiry time, as the run leases' takeover says",
        LEDGER,
    ),
    Mutant(
        "in-doubt-on-claim",
        "domain/operation.py",
        "in_doubt=status is EffectStatus.IN_DOUBT,",
        "in_doubt=False,",
        "a claim granted over an unanswered one must say the effect may have happened",
        LEDGER,
    ),
    Mutant(
        "in-doubt-on-read",
        "domain/operation.py",
        "in_doubt=self.in_doubt or self.status(now) is EffectStatus.IN_DOUBT,",
        "in_doubt=self.in_doubt,",
        "an expired, unanswered claim must read as in doubt before anyone claims again",
        LEDGER,
    ),
    Mutant(
        "held-claim-only",
        "domain/operation.py",
        "if status not in (EffectStatus.CLAIMED, EffectStatus.IN_DOUBT):",
        "if False:",
        "the current token of a settled attempt must not complete or fail it again",
        LEDGER,
    ),
    Mutant(
        "retry-not-due",
        "domain/operation.py",
        "if self.retry_at is not None and now < self.retry_at:",
        "if False:",
        "no attempt before the scheduled retry time (Retry-After)",
        LEDGER,
    ),
    Mutant(
        "retry-max-attempts",
        "domain/operation.py",
        "if len(self.attempts) >= policy.max_attempts:",
        "if len(self.attempts) > policy.max_attempts:",
        "the policy's attempt cap is a cap, not one more",
        LEDGER,
    ),
    Mutant(
        "retry-max-total",
        "domain/operation.py",
        "if (retry_at - started).total_seconds() > policy.max_total:",
        "if False:",
        "retries stop at the policy's total time",
        LEDGER,
    ),
    Mutant(
        "retry-after-wins",
        "domain/operation.py",
        "delay = max(policy.backoff(len(self.attempts), draw), retry_after or 0.0)",
        "delay = policy.backoff(len(self.attempts), draw)",
        "a provider's Retry-After longer than the backoff must be honoured",
        LEDGER,
    ),
    Mutant(
        "backoff-exponent",
        "domain/effects.py",
        "self.initial_delay * 2.0 ** (attempt - 1)",
        "self.initial_delay * 2.0**attempt",
        "the first retry waits up to initial_delay, each later one up to twice as long",
        LEDGER,
    ),
    Mutant(
        "backoff-cap",
        "domain/effects.py",
        "min(self.max_delay, self.initial_delay * 2.0 ** (attempt - 1))",
        "self.initial_delay * 2.0 ** (attempt - 1)",
        "no single wait is longer than max_delay",
        LEDGER,
    ),
    Mutant(
        "reconcile-live-claim",
        "domain/operation.py",
        "        elif status is EffectStatus.CLAIMED:\n            raise self._lease_held(now)\n",
        "",
        "nobody settles an effect from outside while its holder's lease is live",
        LEDGER,
    ),
    Mutant(
        "abandon-completed",
        "domain/operation.py",
        "if status in (EffectStatus.COMPLETED, EffectStatus.ABANDONED):",
        "if status is EffectStatus.ABANDONED:",
        "an effect that happened cannot be declared abandoned",
        LEDGER,
    ),
    # -- input limits ---------------------------------------------------------------------
    Mutant(
        "text-length-limit",
        "domain/validation.py",
        "if len(value) > max_length:",
        "if len(value) > max_length + 1:",
        "ids, kinds and names are bounded exactly as documented",
        LIMITS,
    ),
    Mutant(
        "document-size-limit",
        "domain/validation.py",
        "if len(canonical) > max_bytes:",
        "if len(canonical) > max_bytes + 1:",
        "documents are bounded exactly at the configured size",
        LIMITS,
    ),
    Mutant(
        "blank-text",
        "domain/validation.py",
        "if not value.strip():",
        "if not value:",
        "a blank id or kind is as empty as an empty one",
        LIMITS,
    ),
    Mutant(
        "non-finite-numbers",
        "domain/validation.py",
        'if b"null" in canonical and _has_non_finite_float(value):',
        "if False:",
        "NaN would be stored as null and the state would change on its way through",
        LIMITS,
    ),
    # -- forks, state, checksums ----------------------------------------------------------
    Mutant(
        "fork-boundary-resolution",
        "domain/forking.py",
        "resolved_boundary=state.cursor,",
        "resolved_boundary=at,",
        "a fork's receipt names the cursor where the copied state was made",
        FORK,
    ),
    Mutant(
        "state-checksum-verified",
        "domain/reader.py",
        "if actual != source.state_checksum:",
        "if False:",
        "a state changed behind the store's back is refused on read",
        ("tests/contract/test_big_documents.py",),
    ),
    Mutant(
        "upcast-v1-open-effects",
        "domain/channel.py",
        'state["open_effects"] = []',
        'state["open_effects"] = ["legacy"]',
        "version-1 channel events had no ledger: no open effects",
        ("tests/unit/test_stored_event_fixtures.py",),
    ),
    # -- read models: tracking and run leases ---------------------------------------------
    Mutant(
        "tracking-for-update",
        "adapters/readmodels.py",
        '    " FOR UPDATE",\n)',
        '    "",\n)',
        "two projectors on PostgreSQL must not both apply the batch after the same position",
        PROJECTION,
        postgres=True,
    ),
    Mutant(
        "tracking-sqlite-immediate",
        "adapters/readmodels.py",
        '("BEGIN IMMEDIATE", "COMMIT", "ROLLBACK")',
        '("BEGIN", "COMMIT", "ROLLBACK")',
        "SQLite's counterpart of FOR UPDATE: a batch takes the write lock before it reads",
        PROJECTION,
        survives=(
            "equivalent for exactly-once: in WAL mode a deferred transaction that read the "
            "position before a rival committed cannot write ('database is locked', a transient "
            "error the projector retries), so no event is applied twice; IMMEDIATE only spares "
            "the wasted batch"
        ),
    ),
    Mutant(
        "tracking-last-position",
        "adapters/projector.py",
        "self.db.set_position(name, notifications[-1].id)",
        "self.db.set_position(name, notifications[0].id)",
        "the tracking position moves past the whole batch, or events are applied again",
        PROJECTION,
    ),
    Mutant(
        "run-lease-live",
        "adapters/readmodels.py",
        '"WHERE l.expires_at <= %s RETURNING token"',
        '"WHERE l.expires_at <= %s OR TRUE RETURNING token"',
        "a second worker must not take a run whose lease is live",
        LEASES,
    ),
    Mutant(
        "run-lease-expiry-boundary",
        "adapters/readmodels.py",
        '"WHERE l.expires_at <= %s RETURNING token"',
        '"WHERE l.expires_at < %s RETURNING token"',
        "a run lease is over at its expiry time, as an effect's lease is",
        LEASES,
    ),
    Mutant(
        "run-lease-renew-token",
        "adapters/readmodels.py",
        'WHERE run_id = %s AND token = %s",\n                (self.dialect.adapt(until),',
        'WHERE run_id = %s AND %s > 0",\n                (self.dialect.adapt(until),',
        "a worker whose run was taken over must not renew the new owner's lease",
        LEASES,
    ),
    Mutant(
        "run-lease-release-token",
        "adapters/readmodels.py",
        'WHERE run_id = %s AND token = %s",\n                (self.dialect.adapt(now),',
        'WHERE run_id = %s AND %s > 0",\n                (self.dialect.adapt(now),',
        "a worker whose run was taken over must not release the new owner's lease",
        LEASES,
    ),
    # -- subscriptions --------------------------------------------------------------------
    Mutant(
        "subscription-position",
        "adapters/subscription.py",
        "                self.position = self._position_of(event)\n",
        "",
        "a subscription continues after what it delivered: no duplicates",
        ("tests/contract/test_subscriptions.py",),
    ),
    # -- forks replay their prefix ---------------------------------------------------------
    Mutant(
        "fork-replays-no-calls",
        "adapters/context_replay.py",
        "return self._inheritance().calls.get(self._suffix(key))",
        "return None",
        "a fork's child would sample its parent's recorded model calls again",
        FORK_REPLAY,
    ),
    Mutant(
        "fork-replays-no-effects",
        "adapters/context_replay.py",
        "        if found is None or self._has_own(key):\n            return False, None",
        "        return False, None",
        "a fork's child would send its parent's completed effects again, under a new key",
        FORK_REPLAY,
    ),
    Mutant(
        "fork-restarts-effects-in-flight",
        "adapters/context_replay.py",
        "        if parent.status in MIGHT_HAVE_HAPPENED:",
        "        if False:",
        "an effect in flight at the fork boundary may have happened: the child must not start it",
        FORK_REPLAY,
    ),
    Mutant(
        "fork-forgets-decisions",
        "adapters/context_replay.py",
        "return self._inheritance().decisions.get(self._suffix(name))",
        "return None",
        "a fork's child would wait again for an approval its parent already received",
        FORK_REPLAY,
    ),
    # -- operator actions and migrations ---------------------------------------------------
    Mutant(
        "approval-for-any-name",
        "domain/run.py",
        "        if decision.kind in APPROVAL_KINDS and not (",
        "        if False and (",
        "an approval under a mistyped name would be filed where no wait ever reads it",
        OPERATOR,
    ),
    Mutant(
        "override-result-unwrapped",
        "domain/ledger.py",
        'result=workflow_result(result) if outcome == "completed" else None',
        "result=result",
        "the workflow would not see the result the operator gave",
        OPERATOR,
    ),
    Mutant(
        "override-evidence-unchecked",
        "domain/ledger.py",
        """        proof = require_document(
            "evidence", {} if evidence is None else evidence, self._codec, max_bytes=self._max
        ).value""",
        "        proof = evidence or {}",
        "evidence that is not an object must be a ValidationError, not a TypeError",
        OPERATOR,
    ),
    Mutant(
        "migrate-from-any-schema",
        "domain/run.py",
        "        if (self.pins.schema_ or 1) != from_schema:",
        "        if False:",
        "a stale migration from an older schema would roll the state back",
        MIGRATIONS,
    ),
    Mutant(
        "migrate-at-any-cursor",
        "domain/lifecycle.py",
        "            channel.ensure_at(expected_version=None, expected_cursor=expected_cursor)\n",
        "",
        "a migration computed from an older state would overwrite what came after it",
        MIGRATIONS,
    ),
    Mutant(
        "stale-migration-not-redecided",
        "adapters/store.py",
        "            except (ConflictError, IllegalTransitionError):\n"
        "                run = self.run(run.run_id)",
        "            except ():\n                pass",
        "a worker that lost the migration race must adopt the winner's, not fail the resume",
        MIGRATIONS,
    ),
    # -- steps: retries, unrecordable results ----------------------------------------------
    Mutant(
        "step-result-error-not-final",
        "adapters/context.py",
        "        except ValidationError as error:\n            reason",
        "        except KeyError as error:\n            reason",
        "a step whose result cannot be recorded would be called again on every pass",
        STEPS,
    ),
    Mutant(
        "step-retries-ignore-the-ledger",
        "adapters/context_retries.py",
        "        if self._has_attempts(attempts):",
        "        if False:",
        "a step would be retried before its Retry-After, with no budget",
        STEPS,
    ),
    Mutant(
        "retry-run-keeps-the-old-budget",
        "adapters/context_retries.py",
        'return f"{key}:attempts" + (f":round{retries}" if retries else "")',
        'return f"{key}:attempts"',
        "after retry_run a step that fails again would be blocked by the exhausted budget",
        STEPS,
    ),
    Mutant(
        "not-retried-without-a-reason",
        "domain/operation.py",
        '            error = f"{error} (not retried: {why_not})"',
        "            pass",
        "last_error must say why an effect was not retried",
        STEPS,
    ),
    # -- worker and read-model freshness ---------------------------------------------------
    Mutant(
        "worker-ignores-lease-expiry",
        "adapters/worker.py",
        "        return Cooldown(stop.expires_at)",
        "        return None",
        "a worker behind a dead worker's effect lease would spin until it expires",
        WORKER,
    ),
    Mutant(
        "dead-workers-still-serve",
        "adapters/worker_tables.py",
        '            "AND w.seen_until > %s)"',
        '            "AND w.seen_until IS NOT NULL OR %s IS NULL)"',
        "a run whose only worker died would look served forever",
        WORKER,
    ),
    Mutant(
        "expired-claims-not-in-doubt",
        "adapters/readmodels.py",
        "        changed = {row[0] for row in self.execute(_expire_sql(effects), (at, at))"
        ".fetchall()}",
        "        changed = set()",
        "an effect whose lease ran out would look healthy in run_status",
        WORKER,
    ),
]


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
