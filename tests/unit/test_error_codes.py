"""Every public error's ``code``: callers (and the console's answers) branch on it, so it never
changes; a subclass that names no code of its own keeps its parent's."""

import actae
from actae.domain.errors import ActaeError

CODES = {
    "ActaeError": "actae_error",
    "ValidationError": "validation",
    "NotFoundError": "not_found",
    "ConflictError": "conflict",
    "OperationConflictError": "operation_conflict",
    "FencingError": "fencing",
    "NotHolderError": "not_holder",
    "LeaseHeldError": "lease_held",
    "DeadlineNotPassedError": "deadline_not_passed",
    "DeadlinePassedError": "deadline_passed",
    "IncompatibleResumeError": "incompatible_resume",
    "CorruptionError": "corruption",
    "HistoryRegressedError": "history_regressed",
    "RetryNotDueError": "retry_not_due",
    "EffectBlockedError": "effect_blocked",
    "ContentionError": "contention",
    "IllegalTransitionError": "illegal_transition",
    "NotWaitingError": "not_waiting",
    "RunSuspended": "suspended",
    "RunStoppedError": "run_stopped",
    "LeaseLostError": "lease_lost",
    "StoreNotFoundError": "store_not_found",
    "StoreBusyError": "store_busy",
    "ForgottenError": "forgotten",
    "KeyringError": "keyring",
    "SchemaVersionError": "schema_version",
}


def test_every_public_error_keeps_its_code() -> None:
    errors = {
        name: getattr(actae, name)
        for name in actae.__all__
        if isinstance(getattr(actae, name), type) and issubclass(getattr(actae, name), ActaeError)
    }
    assert {name: error.code for name, error in errors.items()} == CODES


def test_a_subclass_without_a_code_keeps_its_parents() -> None:
    class Mine(actae.ConflictError):
        pass

    class Named(actae.ConflictError, code="mine"):
        pass

    assert (Mine.code, Named.code, actae.ConflictError.code) == ("conflict", "mine", "conflict")
