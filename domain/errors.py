"""Errors of the public contract.

Each carries structured attributes, so callers branch on data, not message text; the message says
what was expected, what was found and what to do. When one is raised, nothing has been written.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any


class ActaeError(Exception):
    """Root of every error Actae raises deliberately; ``code`` names its kind (a stable word)."""

    code = "actae_error"

    def __init_subclass__(cls, code: str | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if code is not None:  # none given: the parent's code
            cls.code = code


class ValidationError(ActaeError, ValueError, code="validation"):
    """Input was rejected before anything was written: ``field`` (dotted if nested), ``reason``."""

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"invalid {field}: {reason}")


class NotFoundError(ActaeError, LookupError, code="not_found"):
    """A run, channel or cursor does not exist (a cursor past the head counts as missing)."""

    def __init__(self, what: str, key: Any, detail: str = "") -> None:
        self.what = what
        self.key = key
        suffix = f": {detail}" if detail else ""
        super().__init__(f"{what} {key!s} not found{suffix}")


class ConflictError(ActaeError, code="conflict"):
    """The channel moved since the caller looked: reload ``store.head`` and decide again."""

    def __init__(
        self,
        channel_id: Any,
        *,
        expected_version: int | None,
        actual_version: int,
        expected_cursor: int | None,
        actual_cursor: int,
    ) -> None:
        self.channel_id = channel_id
        self.expected_version = expected_version
        self.actual_version = actual_version
        self.expected_cursor = expected_cursor
        self.actual_cursor = actual_cursor
        super().__init__(
            f"channel {channel_id} moved: expected state version {expected_version} "
            f"at cursor {expected_cursor}, found state version {actual_version} at cursor "
            f"{actual_cursor}; reload the head and retry with the new values"
        )


class OperationConflictError(ActaeError, code="operation_conflict"):
    """An ``operation_id`` was reused for a different command or different content."""

    def __init__(
        self, operation_id: str, *, recorded_fingerprint: str, presented_fingerprint: str
    ) -> None:
        self.operation_id = operation_id
        self.recorded_fingerprint = recorded_fingerprint
        self.presented_fingerprint = presented_fingerprint
        super().__init__(
            f"operation {operation_id!r} was already used with different content "
            f"(recorded {recorded_fingerprint}, presented {presented_fingerprint}); "
            "derive a new operation id for a new command"
        )


class FencingError(ActaeError, code="fencing"):
    """A ledger call presented a fencing token older than the current claim's."""

    def __init__(self, effect_key: str, *, presented_token: int, current_token: int) -> None:
        self.effect_key = effect_key
        self.presented_token = presented_token
        self.current_token = current_token
        super().__init__(
            f"effect {effect_key!r}: token {presented_token} is stale, the current token "
            f"is {current_token}; another worker holds this effect now"
        )


class NotHolderError(FencingError, code="not_holder"):
    """A ledger call named a worker other than the claim's holder (a token is no credential)."""

    def __init__(self, effect_key: str, *, worker: str, holder: str, token: int) -> None:
        self.worker = worker
        self.holder = holder
        ActaeError.__init__(
            self,
            f"effect {effect_key!r}: token {token} was granted to worker {holder!r}, "
            f"not to {worker!r}; only the holder may heartbeat, complete or fail it",
        )
        self.effect_key = effect_key
        self.presented_token = token
        self.current_token = token


class LeaseHeldError(ActaeError, code="lease_held"):
    """A claim met a live lease held by another worker."""

    def __init__(self, effect_key: str, *, holder: str, expires_at: datetime) -> None:
        self.effect_key = effect_key
        self.holder = holder
        self.expires_at = expires_at
        super().__init__(
            f"effect {effect_key!r} is leased by {holder!r} until {expires_at.isoformat()}"
        )


class DeadlineNotPassedError(LeaseHeldError, code="deadline_not_passed"):
    """A lease ran out before its attempt's deadline (``expires_at``): nobody may take over yet."""

    def __init__(self, effect_key: str, *, holder: str, token: int, deadline: datetime) -> None:
        ActaeError.__init__(
            self,
            f"effect {effect_key!r}: the attempt of token {token} by {holder!r} may still be "
            f"running until its deadline {deadline.isoformat()}; it cannot be taken over, "
            "reconciled or retried before then: try again after it",
        )
        self.effect_key = effect_key
        self.holder = holder
        self.expires_at = deadline
        self.token = token


class DeadlinePassedError(ActaeError, code="deadline_passed"):
    """An attempt answered after its deadline: it is in doubt, not completed; a claim settles it."""

    def __init__(self, effect_key: str, *, token: int, deadline: datetime, now: datetime) -> None:
        self.effect_key = effect_key
        self.token = token
        self.deadline = deadline
        late = (now - deadline).total_seconds()
        super().__init__(
            f"effect {effect_key!r}: the attempt of token {token} answered {late:.3f} s after "
            f"its deadline {deadline.isoformat()}; it is in doubt, not completed: settle it "
            "with reconcile (the next claim does) or store.override()"
        )


class IncompatibleResumeError(ActaeError, code="incompatible_resume"):
    """A run's pins differ from the resuming worker's and no migration bridges them."""

    def __init__(self, run_id: Any, differences: dict[str, tuple[Any, Any]]) -> None:
        self.run_id = run_id
        self.differences = differences
        detail = ", ".join(f"{k}: run {a!r} vs worker {b!r}" for k, (a, b) in differences.items())
        super().__init__(f"run {run_id} cannot resume here: {detail}")


class CorruptionError(ActaeError, code="corruption"):
    """Stored data failed verification on read (say, a checksum): it is not returned."""

    def __init__(self, what: str, detail: str) -> None:
        self.what = what
        self.detail = detail
        super().__init__(f"{what}: {detail}")


class HistoryRegressedError(CorruptionError, code="history_regressed"):
    """The store holds less than this process saw: committed events are gone (docs/outages.md)."""

    def __init__(self, channel: Any, *, seen: int, found: int, what: str = "cursor") -> None:
        self.channel = channel
        self.seen = seen
        self.found = found
        self.measure = what
        super().__init__(
            f"channel {channel}",
            f"history regressed: this process saw {what} {seen}, the store holds {found}; "
            "committed events are missing (a failover to a standby that was behind?). "
            "This store accepts no more writes in this process: restore the missing events "
            "or accept their loss, then restart the processes (docs/outages.md)",
        )


class RetryNotDueError(ActaeError, code="retry_not_due"):
    """An effect failed and its next attempt is scheduled later; claiming now is refused."""

    def __init__(self, effect_key: str, *, retry_at: datetime, wait: float) -> None:
        self.effect_key = effect_key
        self.retry_at = retry_at
        self.wait = wait
        super().__init__(
            f"effect {effect_key!r}: next attempt is due at {retry_at.isoformat()} "
            f"(in {wait:.1f} s); claim again then"
        )


class EffectBlockedError(ActaeError, code="effect_blocked"):
    """An effect needs a person: retries are exhausted, it is in doubt, or it was abandoned."""

    def __init__(self, effect_key: str, *, status: str, detail: str) -> None:
        self.effect_key = effect_key
        self.status = status
        self.detail = detail
        super().__init__(
            f"effect {effect_key!r} is {status}: {detail}; inspect it with store.effect() "
            "and settle it with store.override() (a workflow's effect: its result is what "
            "ctx.effect returns) or store.reconcile(), or give it up with store.abandon()"
        )


class ContentionError(ActaeError, code="contention"):
    """A command kept losing races against other writers and gave up; retry it later."""

    def __init__(self, what: str, attempts: int) -> None:
        self.what = what
        self.attempts = attempts
        super().__init__(f"{what}: lost {attempts} races in a row to other writers; retry later")


class IllegalTransitionError(ActaeError, code="illegal_transition"):
    """A lifecycle command does not apply to the run's current status."""

    def __init__(self, run_id: Any, *, status: str, action: str) -> None:
        self.run_id = run_id
        self.status = status
        self.action = action
        super().__init__(f"cannot {action} run {run_id}: it is {status}")


class NotWaitingError(IllegalTransitionError, code="not_waiting"):
    """An approval or denial names a wait the run is not in (a typo would never wake it)."""

    def __init__(self, run_id: Any, *, name: str, kind: str, waiting: list[str]) -> None:
        self.name = name
        self.waiting = waiting
        found = (
            "it waits for " + ", ".join(waiting) if waiting else "it is not waiting for anything"
        )
        action = {"approved": "approve", "denied": "deny"}.get(kind, kind)
        super().__init__(
            run_id, status=f"not waiting for approval {name!r} ({found})", action=action
        )


class RunSuspended(ActaeError, code="suspended"):  # noqa: N818 - a control signal, not a failure
    """Raised inside workflow code when the run waits; the workflow reruns once the wait ends."""

    def __init__(self, run_id: Any, *, reason: str, name: str, until: datetime | None) -> None:
        self.run_id = run_id
        self.reason = reason
        self.name = name
        self.until = until
        when = f" until {until.isoformat()}" if until else ""
        super().__init__(f"run {run_id} waits for {reason} {name!r}{when}")


class RunStoppedError(ActaeError, code="run_stopped"):
    """The run was paused, cancelled, completed or failed; workflow code must stop here."""

    def __init__(self, run_id: Any, *, status: str) -> None:
        self.run_id = run_id
        self.status = status
        super().__init__(f"run {run_id} is {status}; stopping at this step boundary")


class LeaseLostError(ActaeError, code="lease_lost"):
    """A worker's run lease ran out: the workflow stops at its next step boundary."""

    def __init__(self, run_id: Any, *, worker: str) -> None:
        self.run_id = run_id
        self.worker = worker
        super().__init__(
            f"run {run_id}: the lease of worker {worker!r} ran out while the database was "
            "unreachable; stopping at this step boundary"
        )


class StoreNotFoundError(NotFoundError, code="store_not_found"):
    """``actae.open(url, create=False)`` found no store at ``url`` (password masked)."""

    def __init__(self, url: str) -> None:
        self.what = "store"
        self.key = url
        self.url = url
        # Not NotFoundError's "<what> <key> not found": the line a user sees names the URL.
        ActaeError.__init__(
            self,
            f"no Actae store at {url}; check the URL (opening a store only to read it never "
            "creates one)",
        )


class StoreBusyError(ActaeError, code="store_busy"):
    """Opening gave up waiting ``waited`` s for the schema-change ``lock`` ``pids`` held."""

    def __init__(self, lock: str, pids: tuple[int, ...], waited: float) -> None:
        self.lock = lock
        self.pids = pids
        self.waited = waited
        held = (
            "held by backend pid " + ", ".join(str(pid) for pid in pids)
            if pids
            else "held by a backend that has let go since"
        )
        super().__init__(
            f"gave up after {waited:g} s waiting for the lock on {lock}, {held}; wait for it "
            "to finish (pg_stat_activity shows what it runs), end it with "
            "pg_terminate_backend(pid), or raise the store URL's lock_wait"
        )


class ForgottenError(ActaeError, code="forgotten"):
    """The run's contents were forgotten (its data key destroyed); its structure remains."""

    def __init__(self, run_id: Any) -> None:
        self.run_id = run_id
        super().__init__(
            f"run {run_id} was forgotten: its contents were destroyed with its data key"
        )


class KeyringError(ActaeError, code="keyring"):
    """Encrypted contents cannot be read or written with the keyring at hand."""

    def __init__(self, detail: str) -> None:
        self.detail = detail
        super().__init__(detail)
