"""The mutations ``make mutants`` applies: each one guard, weakened, and the tests that must notice.

Each entry is a file, an exact snippet of it, its replacement and why the guard matters
(``tests/mutants.py`` runs them). A mutant known to survive says why in ``survives``.
"""

from __future__ import annotations

from dataclasses import dataclass

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
KNOWN_EFFECTS = ("tests/unit/test_known_effects.py", "tests/contract/test_two_writers.py")
STEPS = ("tests/contract/test_step_retries.py",)
QUERIES = ("tests/contract/test_read_only_queries.py",)
POISON = ("tests/contract/test_poison_and_retry_after.py",)
WORKER = ("tests/contract/test_worker_stalls.py", "tests/contract/test_read_model_freshness.py")
ASYNC_STORE = ("tests/contract/test_async_store.py",)
ASYNC_WORKFLOWS = ("tests/contract/test_async_workflows.py",)
BODY_CHECKSUMS = (
    "tests/contract/test_body_checksums.py",
    "tests/property/test_body_checksums.py",
)
STOPPED_MID_STEP = ("tests/contract/test_stopped_mid_step.py",)
COOLDOWNS = (
    "tests/contract/test_cooldowns_end_on_events.py",
    "tests/contract/test_worker_stalls.py",
)
DEADLINES = ("tests/contract/test_effect_deadlines.py",)
MANY_RUNS = (
    "tests/contract/test_async_workflows.py"
    "::test_fifty_at_once_serve_two_hundred_sleeping_runs_in_seconds",
)


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
    """Why no test kills it, for a mutant that is known to survive (tests/MUTANTS.md)."""


MUTANTS = [
    # -- optimistic concurrency -----------------------------------------------------------
    Mutant(
        "cursor-guard",
        "domain/channel.py",
        "return not version_moved and expected_cursor == self.originator_version",
        "return not version_moved",
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
        "remembered-refusal-trusted",
        "domain/ledger.py",
        "            except ActaeError:\n                known.forget(effect_id)\n",
        "            except ActaeError:\n                raise\n",
        "a remembered effect may be stale: refusing on it would refuse the true holder",
        KNOWN_EFFECTS,
    ),
    Mutant(
        "claim-guess-repeated",
        "domain/ledger.py",
        "    if number == 0:\n        guess = opening_head(run_id, at)\n",
        "    if True:\n        guess = opening_head(run_id, at)\n",
        "a guessed opening head the store refuted is read on the next attempt, not guessed again",
        KNOWN_EFFECTS,
    ),
    Mutant(
        "claim-guess-not-the-opening",
        "domain/ledger.py",
        "return ChannelHead(Run.channel_for(run_id), 1, at, run_id, 1, 1, (), {})",
        "return ChannelHead(Run.channel_for(run_id), 1, at, run_id, 2, 1, (), {})",
        "a claim's guess is the head Channel.open makes: the write proves its version only",
        KNOWN_EFFECTS,
    ),
    Mutant(
        "first-claim-not-the-claim",
        "domain/operation.py",
        "claim = _claim_fields(worker, 1, lease, timeout, in_doubt=False, now=at)",
        "claim = _claim_fields(worker, 2, lease, timeout, in_doubt=False, now=at)",
        "a new effect's claim, built without its aggregate, must be the claim the aggregate grants",
        ("tests/unit/test_operation.py", "tests/contract/test_fencing.py"),
    ),
    Mutant(
        "first-claim-request-shared",
        "domain/operation.py",
        '                "request": dict(fields["request"]),\n',
        "",
        "a new effect's request is copied as validation copies it: the caller may change theirs",
        ("tests/unit/test_operation.py",),
    ),
    Mutant(
        "remembered-repeat-not-answered",
        "domain/ledger.py",
        "        answer = None if recorded is None else recorded(stored, at)\n",
        "        answer = None\n",
        "a completion repeated after its first reply was lost must get the recorded answer,"
        " not a refusal",
        KNOWN_EFFECTS,
    ),
    Mutant(
        "remembered-lease-trusted-after-expiry",
        "domain/known_effects.py",
        "        if effect.expires_at is None or effect.expires_at <= now:  # the lease ran out\n",
        "        if False:\n",
        "a remembered claim whose lease ran out may have been taken over, settled and purged"
        " elsewhere: a write on a purged effect collides with nothing",
        KNOWN_EFFECTS,
    ),
    Mutant(
        "purge-keeps-the-guesses",
        "adapters/runtime/retention.py",
        "        self._service.forget_guesses(everything)  # a write on them would collide with"
        " nothing\n",
        "",
        "a process that purged a run must not write on the effects and channels it remembers"
        " of it: nothing is left in the store for such a write to collide with",
        KNOWN_EFFECTS,
    ),
    Mutant(
        "remembered-effect-gap-kept",
        "domain/known_effects.py",
        "                    if known[-1].originator_version + 1 != event.originator_version:\n"
        "                        del self._events[effect_id]  # a gap: another process wrote"
        " between\n"
        "                        continue\n",
        "",
        "an effect remembered without another process's event would decide on a false state"
        " and write past it",
        KNOWN_EFFECTS,
    ),
    Mutant(
        "settled-effect-remembered",
        "domain/known_effects.py",
        "                if newest and not isinstance(newest[0], HELD):\n",
        "                if False:\n",
        "a process would remember every effect it ever settled (memory grows without bound)",
        KNOWN_EFFECTS,
    ),
    Mutant(
        "read-ahead-after-a-moved-position",
        "adapters/readside/read_ahead.py",
        "        if pending is not None and pending[0] == position:\n",
        "        if pending is not None:\n",
        "a page read ahead after a position another projector has since moved past would be"
        " applied twice",
        PROJECTION,
        postgres=True,
    ),
    Mutant(
        "head-cache-never-back",
        "domain/channel.py",
        "if known is not None and known.originator_version >= event.originator_version:",
        "if False:",
        "a late reader must not replace a newer remembered head with an older one",
        ("tests/unit/test_channel.py", "tests/contract/test_two_writers.py"),
    ),
    # -- idempotency: what an operation's fingerprint covers ------------------------------
    Mutant(
        "append-mismatch-replays-record",
        "adapters/runtime/service.py",
        "        original = self._earlier(append) if look else None\n",
        "        original = None\n",
        "a retried record or transition (stale expected values) must replay, not conflict",
        IDEMPOTENCY,
    ),
    Mutant(
        "effects-memory-not-fed",
        "adapters/runtime/service.py",
        "            else:\n                others.append(event)\n",
        "",
        "an effect's events must reach the memory that saves a claim's settlement its read",
        ("tests/integration/test_round_trips.py",),
        postgres=True,
    ),
    Mutant(
        "append-lost-race-replays-record",
        "adapters/runtime/service.py",
        "                    original = self._earlier(append)\n",
        "                    original = None\n",
        "the winner of a lost race under this operation id may be this call: it replays",
        ("tests/contract/test_two_writers.py", "tests/contract/test_idempotency.py"),
    ),
    Mutant(
        "commit-wakes-no-waiting-reader",
        "adapters/readside/subscription.py",
        "            if self.waiting:",
        "            if False:",
        "a reader waiting for this process's commits wakes when one commits, not at its timeout",
        ("tests/unit/test_commit_wakeups.py",),
    ),
    Mutant(
        "transition-fingerprint-state",
        "domain/channel.py",
        'fingerprint("transition", str(cid), kind, body.decode(), document.checksum)',
        'fingerprint("transition", str(cid), kind, body.decode())',
        "a retry with another state must be refused, not replayed as if it were the same step",
        IDEMPOTENCY,
    ),
    Mutant(
        "transition-fingerprint-payload",
        "domain/channel.py",
        'fingerprint("transition", str(cid), kind, body.decode(), document.checksum)',
        'fingerprint("transition", str(cid), kind, document.checksum)',
        "a retry with another payload must be refused",
        IDEMPOTENCY,
    ),
    Mutant(
        "transition-fingerprint-channel",
        "domain/channel.py",
        'fingerprint("transition", str(cid), kind, body.decode(), document.checksum)',
        'fingerprint("transition", kind, body.decode(), document.checksum)',
        "an operation id reused on another channel must be refused",
        IDEMPOTENCY,
    ),
    Mutant(
        "record-fingerprint-usage",
        "domain/channel.py",
        "usage_part = (str(sorted(spent.items())),) if spent else ()",
        "usage_part = ()",
        "a repeated record with other usage would replay and the budget would count the wrong one",
        IDEMPOTENCY,
    ),
    Mutant(
        "start-fingerprint-pins",
        "domain/starting.py",
        "        core.canonical_text(checked_pins.as_dict()),\n",
        "",
        "a start repeated with other pins (another model) must be refused",
        IDEMPOTENCY,
    ),
    Mutant(
        "start-fingerprint-parent",
        "domain/starting.py",
        "        str(parent),\n",
        "",
        "a start repeated under another parent must be refused",
        IDEMPOTENCY,
    ),
    Mutant(
        "start-fingerprint-budget",
        "domain/starting.py",
        "*((str(sorted(spend.items())),) if spend else ()),",
        "",
        "a start repeated with another budget must be refused",
        IDEMPOTENCY,
    ),
    Mutant(
        "fork-fingerprint-reason",
        "domain/forking.py",
        '"fork", str(cid), str(at), str(reason), shell.core.canonical_text(overrides.as_dict())',
        '"fork", str(cid), str(at), shell.core.canonical_text(overrides.as_dict())',
        "a fork repeated with another reason must be refused, or the receipt lies about why",
        FORK,
    ),
    Mutant(
        "fork-fingerprint-pins",
        "domain/forking.py",
        '"fork", str(cid), str(at), str(reason), shell.core.canonical_text(overrides.as_dict())',
        '"fork", str(cid), str(at), str(reason)',
        "a fork repeated with other pins (another model) must be refused",
        FORK,
    ),
    Mutant(
        "fork-fingerprint-boundary",
        "domain/forking.py",
        '"fork", str(cid), str(at), str(reason), shell.core.canonical_text(overrides.as_dict())',
        '"fork", str(cid), str(reason), shell.core.canonical_text(overrides.as_dict())',
        "a fork repeated from another cursor must be refused",
        FORK,
    ),
    # -- idempotency: one namespace of operation ids, kept unique by the store ------------
    Mutant(
        "operation-id-left-out-of-the-row",
        "adapters/persistence/codec.py",
        "    if key is not None:\n        return StoredRecord(",
        "    if False:\n        return StoredRecord(",
        "a record's row must carry its operation id, or a second execution is written",
        IDEMPOTENCY,
    ),
    Mutant(
        "operation-index-not-unique",
        "adapters/persistence/baseline.py",
        '"CREATE UNIQUE INDEX actae_events_operation_id ON {schema}.actae_events "',
        '"CREATE INDEX actae_events_operation_id ON {schema}.actae_events "',
        "PostgreSQL must refuse a second row with the same operation id",
        ("tests/contract/test_idempotency.py",),
        postgres=True,
    ),
    Mutant(
        "sqlite-operation-index-not-unique",
        "adapters/persistence/baseline.py",
        '"CREATE UNIQUE INDEX stored_events_operation_id ON stored_events',
        '"CREATE INDEX stored_events_operation_id ON stored_events',
        "SQLite must refuse a second row with the same operation id",
        ("tests/contract/test_idempotency.py",),
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
        'fingerprint("effect", str(run), canonical.decode())',
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
        "        if status is EffectStatus.IN_DOUBT:",
        "        if status is EffectStatus.IN_DOUBT:",
        "a live claim keeps every other worker out",
        LEDGER,
    ),
    Mutant(
        "effect-lease-expiry-boundary",
        "domain/effects.py",
        "live = expires_at is not None and now < expires_at",
        "live = expires_at is not None and now <= expires_at",
        "a lease is over at its expiry time, as the run leases' takeover says",
        LEDGER,
    ),
    Mutant(
        "in-doubt-on-claim",
        "domain/operation.py",
        "        in_doubt = status is EffectStatus.IN_DOUBT\n",
        "        in_doubt = False\n",
        "a claim granted over an unanswered one must say the effect may have happened",
        LEDGER,
    ),
    Mutant(
        "in-doubt-on-read",
        "domain/operation.py",
        "in_doubt=self.in_doubt or status is EffectStatus.IN_DOUBT,",
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
    # -- ledger: every attempt's deadline (issue 28, item 2) ------------------------------
    Mutant(
        "deadline-takeover",
        "domain/operation.py",
        "        if status is EffectStatus.IN_DOUBT:\n"
        "            self.ensure_deadline_passed(now)\n"
        "        if self.retry_at",
        "        if self.retry_at",
        "a lapsed lease is no proof the attempt is over: no takeover before its deadline",
        DEADLINES,
    ),
    Mutant(
        "deadline-reconcile",
        "domain/operation.py",
        "        status = self.status(now)\n"
        "        if status is EffectStatus.IN_DOUBT:\n"
        "            self.ensure_deadline_passed(now)\n"
        "        if token is not None:",
        "        status = self.status(now)\n        if token is not None:",
        "the provider's word before the deadline may change: nobody reconciles until it passed",
        DEADLINES,
    ),
    Mutant(
        "deadline-boundary",
        "domain/operation.py",
        "if self.deadline is not None and now < self.deadline:",
        "if self.deadline is not None and now <= self.deadline:",
        "an attempt is over at its deadline, as a lease is at its expiry",
        DEADLINES,
    ),
    Mutant(
        "late-completion",
        "domain/operation.py",
        "        self._ensure_in_time(token, now)\n        self._sealed(self.Completed,",
        "        self._sealed(self.Completed,",
        "an answer after the deadline may race a takeover: in doubt, never completed",
        DEADLINES,
    ),
    Mutant(
        "repeated-doubt-written-twice",
        "domain/ledger.py",
        "    return _decide(shell, effect_key, note, move, recorded=recorded)",
        "    return _decide(shell, effect_key, note, move)",
        "a doubt repeated after a lost reply is answered from the store, never written twice",
        DEADLINES,
    ),
    Mutant(
        "late-failure-retried",
        "domain/operation.py",
        "        if not final:\n            self._ensure_in_time(token, now)",
        "        if False:\n            self._ensure_in_time(token, now)",
        "a client that gave up at the deadline cannot say the call did not land: in doubt,"
        " never retried without asking the provider",
        DEADLINES,
    ),
    Mutant(
        "late-failure-not-doubted",
        "adapters/runtime/run_ledger.py",
        '            raise self._in_doubt(key, token, "it failed at or after its deadline")'
        " from error",
        "            raise",
        "a failure the ledger refused as late must leave the attempt in doubt, not unsettled",
        DEADLINES,
    ),
    Mutant(
        "heartbeat-moves-deadline",
        "domain/operation.py",
        '            """Move the lease\'s expiry."""\n'
        "            aggregate.expires_at = self.expires_at\n",
        '            """Move the lease\'s expiry."""\n'
        "            aggregate.expires_at = self.expires_at\n"
        "            aggregate.deadline = self.expires_at\n",
        "heartbeats extend the lease, never the deadline others wait for",
        DEADLINES,
    ),
    Mutant(
        "deadline-default-not-lease",
        "domain/ledger.py",
        'seconds = lease if timeout is None else _seconds("timeout", timeout)',
        'seconds = 2 * lease if timeout is None else _seconds("timeout", timeout)',
        "the default deadline is the lease, as documented",
        DEADLINES,
    ),
    Mutant(
        "timeout-unchecked",
        "domain/ledger.py",
        'seconds = lease if timeout is None else _seconds("timeout", timeout)',
        "seconds = lease if timeout is None else float(timeout)",
        "a bad timeout is a ValidationError naming it, and nothing is written",
        DEADLINES,
    ),
    Mutant(
        "step-counter-deadline",
        "domain/ledger.py",
        "return None if counts_step_attempts(key) else seconds",
        "return seconds",
        "a retried step's attempt counter guards no effect: a slow step still counts",
        DEADLINES,
    ),
    Mutant(
        "deadline-not-given-to-fn",
        "adapters/runtime/run_ledger.py",
        "with attempt_deadline(claim.deadline):",
        "with attempt_deadline(None):",
        "fn reads its attempt's deadline, to give the provider call as its timeout",
        DEADLINES,
    ),
    Mutant(
        "late-answer-not-doubted",
        "adapters/runtime/run_ledger.py",
        'raise self._in_doubt(key, token, "it answered after its deadline") from None',
        "raise",
        "a late answer is recorded as in doubt at once, not left to a lease that may run long",
        DEADLINES,
    ),
    Mutant(
        "async-fn-not-cancelled",
        "adapters/runtime/async_context.py",
        "        if deadline is None:\n            return awaitable\n",
        "        if True:\n            return awaitable\n",
        "an async fn is cancelled at its deadline: nothing of it may land after a takeover",
        DEADLINES,
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
    # -- read models: tracking and run leases ---------------------------------------------
    Mutant(
        "tracking-for-update",
        "adapters/readside/readmodels.py",
        '    lock_suffix = " FOR UPDATE"',
        '    lock_suffix = ""',
        "two projectors on PostgreSQL must not both apply the batch after the same position",
        PROJECTION,
        postgres=True,
    ),
    Mutant(
        "tracking-sqlite-immediate",
        "adapters/readside/readmodels.py",
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
        "tracking-moves-from-any-position",
        "adapters/readside/readmodels.py",
        'f"UPDATE {TRACKING} SET position = {p} WHERE name = {p} AND position = {p} "',
        'f"UPDATE {TRACKING} SET position = {p} WHERE name = {p} AND {p} >= 0 "',
        "a batch commits only from the position it was read after: another projector's "
        "batch must not be applied twice",
        PROJECTION,
        postgres=True,
    ),
    Mutant(
        "tracking-last-position",
        "adapters/readside/projector.py",
        "return self.notifications[-1].id",
        "return self.notifications[0].id",
        "the tracking position moves past the whole batch, or events are applied again",
        PROJECTION,
    ),
    Mutant(
        "run-lease-live",
        "adapters/runtime/run_lease.py",
        'f"WHERE l.expires_at <= {p} RETURNING token"',
        'f"WHERE l.expires_at <= {p} OR TRUE RETURNING token"',
        "a second worker must not take a run whose lease is live",
        LEASES,
    ),
    Mutant(
        "run-lease-expiry-boundary",
        "adapters/runtime/run_lease.py",
        'f"WHERE l.expires_at <= {p} RETURNING token"',
        'f"WHERE l.expires_at < {p} RETURNING token"',
        "a run lease is over at its expiry time, as an effect's lease is",
        LEASES,
    ),
    Mutant(
        "run-lease-renew-token",
        "adapters/runtime/run_lease.py",
        'WHERE run_id = {p} AND token = {p}",\n                (db.adapt(until),',
        'WHERE run_id = {p} AND {p} > 0",\n                (db.adapt(until),',
        "a worker whose run was taken over must not renew (nor release) the new owner's lease",
        LEASES,
    ),
    # -- subscriptions --------------------------------------------------------------------
    Mutant(
        "subscription-position",
        "adapters/readside/subscription.py",
        "        self.position = self._position_of(event)\n",
        "",
        "a subscription continues after what it delivered: no duplicates",
        ("tests/contract/test_subscriptions.py",),
    ),
    # -- forks replay their prefix ---------------------------------------------------------
    Mutant(
        "fork-replays-no-calls",
        "adapters/runtime/inheritance.py",
        'found: ChannelEvent | None = self._inherited("calls", key)',
        "found: ChannelEvent | None = None",
        "a fork's child would sample its parent's recorded model calls again",
        FORK_REPLAY,
    ),
    Mutant(
        "fork-replays-no-effects",
        "adapters/runtime/inheritance.py",
        "        if found is None or self._service.call(ledger.find_effect, key) is not None:",
        "        if True:",
        "a fork's child would send its parent's completed effects again, under a new key",
        FORK_REPLAY,
    ),
    Mutant(
        "fork-restarts-unfinished-effects",
        "adapters/runtime/inheritance.py",
        "        if parent.status is EffectStatus.ABANDONED:",
        "        if parent.status is not EffectStatus.COMPLETED:",
        "an unfinished parent effect may still happen: the child must not start its own",
        FORK_REPLAY,
    ),
    Mutant(
        "fork-forgets-decisions",
        "adapters/runtime/inheritance.py",
        'found: Decision | None = self._inherited("decisions", name)',
        "found: Decision | None = None",
        "a fork's child would wait again for an approval its parent already received",
        FORK_REPLAY,
    ),
    # -- operator actions and migrations ---------------------------------------------------
    Mutant(
        "approval-for-any-name",
        "domain/run.py",
        "        if decision.kind in APPROVAL_KINDS and (",
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
        '    proof = shell.core.document("evidence", evidence).value',
        "    proof = evidence",
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
        "        channel.ensure_at(expected_version=None, expected_cursor=expected_cursor)\n",
        "",
        "a migration computed from an older state would overwrite what came after it",
        MIGRATIONS,
    ),
    Mutant(
        "stale-migration-not-redecided",
        "domain/lifecycle.py",
        "        except (ConflictError, IllegalTransitionError):\n",
        "        except ():\n",
        "a worker that lost the migration race must adopt the winner's, not fail the resume",
        MIGRATIONS,
    ),
    # -- steps: retries, unrecordable results ----------------------------------------------
    Mutant(
        "step-result-error-not-final",
        "adapters/runtime/store.py",
        "        except ValidationError as error:\n            reason",
        "        except KeyError as error:\n            reason",
        "a step whose result cannot be recorded would be called again on every pass",
        STEPS,
    ),
    Mutant(
        "step-retries-ignore-the-ledger",
        "adapters/runtime/run_ledger.py",
        "        claim = None\n        if info is not None:",
        "        claim = None\n        if False:",
        "a step would be retried before its Retry-After, with no budget",
        STEPS,
    ),
    Mutant(
        "retry-run-keeps-the-old-budget",
        "domain/effects.py",
        'return step_key + STEP_ATTEMPTS + (f":round{retry_round}" if retry_round else "")',
        "return step_key + STEP_ATTEMPTS",
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
    Mutant(
        "give-up-not-finished-after-a-crash",
        "adapters/runtime/run_ledger.py",
        "            if info.status in GIVEN_UP:",
        "            if False:",
        "a worker killed while giving up a step would leave the run blocked, not failed",
        STEPS,
    ),
    Mutant(
        "earlier-rounds-left-open",
        "adapters/runtime/store.py",
        "            if self.run.retries:\n"
        "                self._ledger.close_earlier_rounds(key)\n",
        "",
        "a run retried while a step was retrying would show 'retrying' forever",
        STEPS,
    ),
    Mutant(
        "step-attempts-ask-for-reconcile",
        "adapters/readside/standings.py",
        "        f\"AND replace(e.effect_key, '{STEP_ATTEMPTS}', '') = e.effect_key\"",
        '        "AND 1 = 1"',
        "a step is made again, never reconciled: run_status must not ask for it",
        STEPS,
    ),
    Mutant(
        "paused-migration-looks-like-a-race",
        "domain/lifecycle.py",
        "            if reader.run(run_id).status not in RUNNING_STATUSES:",
        "            if False:",
        "a paused run's refused migration must say so, not 'lost 50 races'",
        STEPS,
    ),
    Mutant(
        "plain-result-unwrapped",
        "domain/effects.py",
        'return result["value"] if result.keys() == {"value"} else result',
        'return result.get("value")',
        "an effect settled with store.reconcile and a plain result must return it as given",
        STEPS,
    ),
    Mutant(
        "unrecordable-effect-result-lost",
        "adapters/runtime/run_ledger.py",
        '        except ValidationError as error:\n            reason = f"it ran',
        '        except KeyError as error:\n            reason = f"it ran',
        "an effect that ran must be held for review, not left to run again",
        STEPS,
    ),
    Mutant(
        "fork-misreads-records-as-notes",
        "domain/inheritance.py",
        '        if suffix is not None and suffix.split(":", 1)[0] in CALL_KINDS:',
        '        if suffix is not None and suffix.split(":", 1)[0] in CALL_KINDS'
        ' and not event.kind.startswith(("effect.", "run.")):',
        "a record whose kind looks like a ledger note must still replay in a fork",
        FORK_REPLAY,
    ),
    Mutant(
        "workflow-result-must-be-a-mapping",
        "adapters/runtime/outcomes.py",
        "    if isinstance(returned, Mapping):",
        "    if True:",
        "a workflow returning a string or a number must complete, not fail after its work",
        WORKER,
    ),
    Mutant(
        "poison-escapes-the-worker",
        "adapters/runtime/worker.py",
        "            advanced += self._isolated(row, now)",
        "            advanced += self._serve(row, now)",
        "one run whose failure cannot be recorded must not stop every other run",
        POISON,
    ),
    Mutant(
        "poison-error-unprintable",
        "adapters/runtime/worker.py",
        '        message = printable(f"{type(error).__name__}: {error}")',
        '        message = f"{type(error).__name__}: {error}"',
        "an error holding cut-off model output must still fail its run, readably",
        POISON,
    ),
    Mutant(
        "retry-after-header-refused",
        "domain/validation.py",
        "    if isinstance(value, str):\n"
        "        seconds = _header_seconds(field, value.strip(), now)",
        '    if isinstance(value, str):\n        raise ValidationError(field, "a string")',
        "a Retry-After taken straight from an HTTP header must schedule the retry",
        POISON,
    ),
    Mutant(
        "analyst-query-writes",
        "adapters/readside/projector.py",
        "        return self.db.read_only_query(statement, params)",
        "        return self.db.query(statement, params)",
        "projector.query is read-only: a DELETE or DROP there must change nothing",
        QUERIES,
    ),
    Mutant(
        "analyst-sql-simple-protocol",
        "adapters/readside/analyst_sql.py",
        "            with conn.pipeline():  # the extended protocol: one statement only",
        "            if True:",
        "'SELECT 1; COMMIT; DELETE FROM audit' must be refused whole, not run one by one",
        QUERIES,
        postgres=True,
    ),
    Mutant(
        "analyst-sql-read-write",
        "adapters/readside/analyst_sql.py",
        '            conn.execute("BEGIN READ ONLY")',
        '            conn.execute("BEGIN")',
        "a write in projector.query is refused by the database, not quietly undone",
        QUERIES,
        postgres=True,
    ),
    Mutant(
        "analyst-sql-session-kept",
        "adapters/readside/analyst_sql.py",
        "            conn.close()  # the session ends",
        "            self.kept = conn  # the session ends",
        "an advisory lock or a prepared statement taken in projector.query must not outlive it",
        QUERIES,
        postgres=True,
    ),
    Mutant(
        "analyst-sql-sqlite-any-action",
        "adapters/readside/analyst_sql.py",
        "            if action in READS:",
        "            if True:",
        "on SQLite an ATTACH in projector.query would create the file it names (the read-only"
        " connection refuses only the writes into it)",
        QUERIES,
    ),
    Mutant(
        "schema-any-length",
        "adapters/persistence/url.py",
        "    if len(schema.encode()) > MAX_NAME_BYTES:",
        "    if False:",
        "PostgreSQL cuts long schema names: two URLs would open one store",
        QUERIES,
    ),
    Mutant(
        "schema-of-postgres",
        "adapters/persistence/url.py",
        '    if schema == "information_schema" or schema.startswith("pg_"):',
        "    if False:",
        "a store must not be created among PostgreSQL's own catalogs",
        QUERIES,
    ),
    Mutant(
        "stored-topic-imports-anything",
        "domain/aggregate.py",
        '            if topic != cls.type_name.partition(".")[0]:',
        "            if False:",
        "a first event's tampered originator_topic must not import the module it names",
        ("tests/unit/test_stored_topics.py",),
    ),
    Mutant(
        "type-name-unchecked",
        "domain/type_names.py",
        "        if not isinstance(event_name, str) or not _names_an_event_of(event_name, name):",
        "        if False:",
        "an event class without its own stable type name must fail at import",
        ("tests/unit/test_type_names.py",),
    ),
    Mutant(
        "type-name-twice",
        "domain/type_names.py",
        "    if other is not None and other is not cls:",
        "    if False:",
        "two classes must never declare one type name: a stored row names one class",
        ("tests/unit/test_type_names.py",),
    ),
    Mutant(
        "stored-topic-any-class",
        "adapters/persistence/codec.py",
        "    if not (isinstance(cls, type) and issubclass(cls, DomainEvent)):",
        "    if False:",
        "a stored topic naming an Actae class that is no event must be refused as corruption",
        ("tests/unit/test_stored_topics.py",),
    ),
    Mutant(
        "encoder-moves-nested-fields",
        "adapters/persistence/encoders.py",
        "= dump_{index}(values[{name!r}])",
        "= dump_{index}(values.pop({name!r}))",
        "stored bytes must not change: a field holding models would move to the end of the body",
        ("tests/property/test_encoders.py",),
    ),
    # -- stored bodies' checksums (issue 28, item 4) ---------------------------------------
    Mutant(
        "body-checksum-unchecked",
        "adapters/persistence/codec.py",
        "    if actual != recorded:",
        "    if False:",
        "a byte flipped in a recorded step result must be refused, not served as the result",
        BODY_CHECKSUMS,
    ),
    Mutant(
        "body-checksum-not-written",
        "adapters/persistence/codec.py",
        "    stamped_body = stamped(topic, originator_id, version, body, state)",
        "    stamped_body = body",
        "a body written by this version must never be accepted without a checksum",
        BODY_CHECKSUMS,
    ),
    Mutant(
        "body-checksum-missing-accepted",
        "adapters/persistence/codec.py",
        '        raise CorruptionError(\n            where(stored),\n            "its body has no',
        "        return bytes(state)\n"
        '        raise CorruptionError(\n            where(stored),\n            "its body has no',
        "a body whose checksum member is gone changed below Actae: it must be refused",
        BODY_CHECKSUMS,
    ),
    Mutant(
        "body-checksum-not-bound-to-its-row",
        "adapters/persistence/codec.py",
        'return b"|%b|%b|%d|%b" % (topic.encode(), originator, version, length)',
        "return length",
        "a body copied to another row, or a changed topic or version, must be refused",
        BODY_CHECKSUMS,
    ),
    Mutant(
        "body-checksum-closing-unchecked",
        "adapters/persistence/codec.py",
        "        and member.endswith(CLOSING)\n",
        "        and True\n",
        "a changed byte at the very end of a body is a changed body too",
        BODY_CHECKSUMS,
    ),
    Mutant(
        "body-checksum-length-unparsed",
        "adapters/persistence/codec.py",
        "        and (length == IN_ORDER or length.isdigit())\n",
        "        and True\n",
        "a damaged length in the checksum member is corruption, not a crash",
        BODY_CHECKSUMS,
    ),
    Mutant(
        "body-checksum-separator-unchecked",
        "adapters/persistence/codec.py",
        "        and member[SEPARATED] == SEPARATOR\n",
        "        and True\n",
        "the checksum does not hash its own member: each of its bytes is checked by position",
        BODY_CHECKSUMS,
    ),
    Mutant(
        "body-checksum-trusts-any-state",
        "adapters/persistence/codec.py",
        " and body.startswith(state.canonical, len(view) - len(state.canonical)):",
        ":",
        "a state the body does not end with must not be taken as hashed: the row would not verify",
        BODY_CHECKSUMS,
    ),
    Mutant(
        "unfit-body-not-corruption",
        "adapters/persistence/codec.py",
        "        except (ValueError, TypeError, KeyError, AttributeError) as error:",
        "        except () as error:",
        "a damaged checksum member leaves a member no event has: CorruptionError, not a crash",
        BODY_CHECKSUMS,
    ),
    # -- worker and read-model freshness ---------------------------------------------------
    Mutant(
        "worker-ignores-lease-expiry",
        "adapters/runtime/outcomes.py",
        "        return Cooldown(stop.expires_at, cursor=cursor)",
        "        return None",
        "a worker behind a dead worker's effect lease would spin until it expires",
        WORKER,
    ),
    Mutant(
        "worker-repeats-itself",
        "adapters/runtime/worker.py",
        "        if self._last_said.get(str(run_id)) != what:",
        "        if True:",
        "a run stuck for one reason must be logged once, not on every try",
        WORKER,
    ),
    Mutant(
        "worker-config-fails-runs",
        "adapters/runtime/worker.py",
        """        except ActaeError as stop:
            said = self._describe_stop(stop, run_id)
            return said, cooldown_for(stop, self.store.now(), cursor=seen)
        ctx.lease, ctx.outage""",
        """        except ValidationError as stop:
            return self._fail(run_id, stop), None
        ctx.lease, ctx.outage""",
        "a worker's own invalid pins must not fail the runs it touches",
        WORKER,
    ),
    # -- issue 28 items 5 and 6: a stop during a step; cooldowns that an event ends ----------
    Mutant(
        "step-result-dropped-after-a-pause",
        "adapters/runtime/channel_head.py",
        "                if self.receipt.cursor <= seen:  # not moved past notes: a rival's write",
        "                if True:",
        "a step that finished after a pause or cancel must be recorded, not sampled again",
        STOPPED_MID_STEP,
    ),
    Mutant(
        "step-recorded-past-a-rival",
        "adapters/runtime/channel_head.py",
        """                seen = self.receipt.cursor
                self.adopt_notes()""",
        """                seen = self.receipt.cursor
                self.refresh()""",
        "only notes are moved past: another worker's write means it drives the run now",
        STOPPED_MID_STEP,
    ),
    Mutant(
        "paused-last-step-cools-down",
        "adapters/runtime/worker.py",
        "            ctx.checkpoint()  # raises RunStoppedError for a run that may not go on",
        "            pass",
        "a run paused during its last step stops at the boundary, with no cooldown to wait out",
        STOPPED_MID_STEP,
    ),
    Mutant(
        "cooldown-outlives-new-events",
        "adapters/runtime/outcomes.py",
        "        return head is not None and self.cursor is not None and head > self.cursor",
        "        return False",
        "an operator's override, unpause, approval, signal or retry must end the cooldown",
        COOLDOWNS,
    ),
    Mutant(
        "cooldown-ends-on-its-own-head",
        "adapters/runtime/outcomes.py",
        "        return head is not None and self.cursor is not None and head > self.cursor",
        "        return head is not None and self.cursor is not None and head >= self.cursor",
        "without a new event the cooldown holds: a worker must not spin on a stuck run",
        COOLDOWNS,
    ),
    Mutant(
        "cooldown-blind-to-the-head",
        "adapters/runtime/worker.py",
        'next_retry_at, head_cursor "',
        'next_retry_at "',
        "the pass's candidates carry the head that ends a stale cooldown, at no extra trip",
        COOLDOWNS,
    ),
    Mutant(
        "cooldown-forgets-its-head",
        "adapters/runtime/worker.py",
        "            cursor = ctx.head.cursor",
        "            cursor = 0",
        "the cooldown remembers the head the context had seen: an older one ends it at once",
        COOLDOWNS,
    ),
    Mutant(
        "dead-workers-still-serve",
        "adapters/readside/standings.py",
        'AND w.seen_until > {p})"',
        'AND w.seen_until IS NOT NULL OR {p} IS NULL)"',
        "a run whose only worker died would look served forever",
        WORKER,
    ),
    Mutant(
        "expired-claims-not-in-doubt",
        "adapters/readside/readmodels.py",
        "        changed = {row[0] for row in self.execute(expire, (at, at)).fetchall()}",
        "        changed = set()",
        "an effect whose lease ran out would look healthy in run_status",
        WORKER,
    ),
    Mutant(
        "held-back-order-reversed",
        "domain/status.py",
        "    (EffectStatus.NEEDS_REVIEW, RunStatus.BLOCKED),\n"
        "    (EffectStatus.RETRY_SCHEDULED, RunStatus.RETRYING),\n",
        "    (EffectStatus.RETRY_SCHEDULED, RunStatus.RETRYING),\n"
        "    (EffectStatus.NEEDS_REVIEW, RunStatus.BLOCKED),\n",
        "a run blocked on a review would say retrying, as if it would move on by itself",
        LEDGER,
    ),
    # -- the asyncio face ----------------------------------------------------------------
    Mutant(
        "postgres-statements-block-the-loop",
        "adapters/persistence/postgres.py",
        "if self.async_pool is not None and in_portal() and self._on_pool_loop():",
        "if False:",
        "a coroutine waiting on PostgreSQL must let the loop serve the others",
        ASYNC_STORE,
        postgres=True,
    ),
    Mutant(
        "sqlite-calls-on-the-loop",
        "adapters/persistence/awaiting.py",
        "return greenback.await_(asyncio.get_running_loop().run_in_executor(pool, call))",
        "return call()",
        "a SQLite write waiting for the file lock must not stall every coroutine",
        ASYNC_STORE,
    ),
    Mutant(
        "async-effect-never-heartbeats",
        "adapters/runtime/run_ledger.py",
        "create_task(_beat_as_task(beat, lease / 3))",
        "create_task(asyncio.sleep(0))",
        "an async effect longer than its lease would fall in doubt while it runs",
        ASYNC_WORKFLOWS,
    ),
    Mutant(
        "cancelled-effect-recorded-as-failed",
        "adapters/runtime/run_ledger.py",
        "        except Exception as error:\n"
        "            info = self._failed(key, claim.token, error)",
        "        except BaseException as error:\n"
        "            info = self._failed(key, claim.token, error)",
        "a cancelled effect may have happened: it is in doubt, not a failure to retry",
        ASYNC_WORKFLOWS,
    ),
    Mutant(
        "fan-out-holds-the-turn",
        "adapters/runtime/async_context.py",
        "            self._turn.release()\n"
        "            turn.held = False\n"
        "            try:\n"
        "                if inspect.iscoroutinefunction(fn):\n"
        "                    return awaiting(self._by_deadline(fn(*args)))\n"
        "                result = awaiting(_in_a_thread(fn, *args))\n"
        "                if inspect.isawaitable(result):\n"
        "                    return awaiting(self._by_deadline(result))\n"
        "                return result\n"
        "            finally:\n"
        "                awaiting(self._turn.acquire())\n",
        "            try:\n"
        "                if inspect.iscoroutinefunction(fn):\n"
        "                    return awaiting(self._by_deadline(fn(*args)))\n"
        "                result = awaiting(_in_a_thread(fn, *args))\n"
        "                if inspect.isawaitable(result):\n"
        "                    return awaiting(self._by_deadline(result))\n"
        "                return result\n"
        "            finally:\n",
        "the calls of a fan-out must run at once, not one after another",
        ASYNC_WORKFLOWS,
    ),
    Mutant(
        "gather-abandons-branches",
        "adapters/runtime/async_context.py",
        "results = await asyncio.gather(*calls, return_exceptions=True)",
        "results = await asyncio.gather(*calls)",
        "a failing branch must not leave the others running after the workflow moved on",
        ASYNC_WORKFLOWS,
    ),
    Mutant(
        "async-worker-one-run-at-a-time",
        "adapters/runtime/async_worker.py",
        "if self._stopping or len(self._in_flight) >= self.concurrency:",
        "if self._stopping or len(self._in_flight) >= 1:",
        "--concurrency N must serve N runs at once",
        MANY_RUNS,
    ),
    Mutant(
        "projector-reads-inside-its-write-lock",
        "adapters/readside/projector.py",
        "        with self.db.transaction():\n"
        "            locked = self.db.move_position(name, position, batch.last)\n"
        "            if locked != position:\n",
        "        with self.db.transaction():\n"
        "            locked = self.db.move_position(name, position, batch.last)\n"
        "            self._page_after(locked)\n"
        "            if locked != position:\n",
        "on SQLite, the projector holding the file's write lock while it waits behind an "
        "event-store writer that waits for that lock deadlocks concurrent workers",
        MANY_RUNS,
    ),
    Mutant(
        "concurrent-release-crashes-the-pass",
        "adapters/runtime/worker.py",
        "        self._unreleased.pop(str(run_id), None)",
        "        del self._unreleased[str(run_id)]",
        "a lease released by a concurrent pass must not stop the worker",
        MANY_RUNS,
    ),
    Mutant(
        "async-worker-slots-for-unmovable-runs",
        "adapters/runtime/async_worker.py",
        "            if not worker.worth_serving(row, now):",
        "            if False:",
        "runs waiting for a person, or for another agent, must not starve runnable ones",
        ASYNC_WORKFLOWS,
        survives="equivalent for correctness: runs that could not move go last in the next "
        "pass anyway, so a fresh run waits one poll interval at most; the check spares the "
        "slots and thread hops",
    ),
    Mutant(
        "cancelled-async-run-failed",
        "adapters/runtime/worker.py",
        "        except concurrent.futures.CancelledError:",
        "        except ZeroDivisionError:",
        "a worker shut down mid-run leaves the run to its lease, as a kill would; never fails it",
        ASYNC_WORKFLOWS,
    ),
]
