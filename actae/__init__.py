"""Actae: durable execution for LLM-agent runs on PostgreSQL (SQLite embedded by default).

``import actae`` gives the public contract, as README.md describes it.
"""

from actae.adapters.persistence.clock import ManualClock, OffsetClock
from actae.adapters.persistence.migrations import SchemaVersionError
from actae.adapters.readside.async_subscription import AsyncSubscription
from actae.adapters.readside.projector import Projector
from actae.adapters.readside.subscription import Subscription
from actae.adapters.runtime.async_context import AsyncRunContext
from actae.adapters.runtime.async_store import AsyncStore, open_async
from actae.adapters.runtime.async_worker import AsyncWorker
from actae.adapters.runtime.deadlines import current_deadline
from actae.adapters.runtime.store import RunContext, Store, open
from actae.adapters.runtime.worker import Registry, Worker, Workflow, workflow
from actae.adapters.telemetry.metrics import observe
from actae.domain.artifacts import ArtifactRef
from actae.domain.effects import Attempt, Claim, EffectInfo, EffectStatus, RetryPolicy
from actae.domain.errors import (
    ActaeError,
    ConflictError,
    ContentionError,
    CorruptionError,
    DeadlineNotPassedError,
    DeadlinePassedError,
    EffectBlockedError,
    FencingError,
    ForgottenError,
    HistoryRegressedError,
    IllegalTransitionError,
    IncompatibleResumeError,
    KeyringError,
    LeaseHeldError,
    LeaseLostError,
    NotFoundError,
    NotHolderError,
    NotWaitingError,
    OperationConflictError,
    RetryNotDueError,
    RunStoppedError,
    RunSuspended,
    StoreBusyError,
    StoreNotFoundError,
    ValidationError,
)
from actae.domain.values import (
    ChannelEvent,
    ForkReceipt,
    Inheritance,
    Lineage,
    OperationRecord,
    Pins,
    Receipt,
    Recovery,
    RetentionReport,
    RunInfo,
    RunStatus,
    StateVersion,
)
from actae.domain.waits import Decision, Wait

__all__ = [
    "ActaeError",
    "ArtifactRef",
    "AsyncRunContext",
    "AsyncStore",
    "AsyncSubscription",
    "AsyncWorker",
    "Attempt",
    "ChannelEvent",
    "Claim",
    "ConflictError",
    "ContentionError",
    "CorruptionError",
    "DeadlineNotPassedError",
    "DeadlinePassedError",
    "Decision",
    "EffectBlockedError",
    "EffectInfo",
    "EffectStatus",
    "FencingError",
    "ForgottenError",
    "ForkReceipt",
    "HistoryRegressedError",
    "IllegalTransitionError",
    "IncompatibleResumeError",
    "Inheritance",
    "KeyringError",
    "LeaseHeldError",
    "LeaseLostError",
    "Lineage",
    "ManualClock",
    "NotFoundError",
    "NotHolderError",
    "NotWaitingError",
    "OffsetClock",
    "OperationConflictError",
    "OperationRecord",
    "Pins",
    "Projector",
    "Receipt",
    "Recovery",
    "Registry",
    "RetentionReport",
    "RetryNotDueError",
    "RetryPolicy",
    "RunContext",
    "RunInfo",
    "RunStatus",
    "RunStoppedError",
    "RunSuspended",
    "SchemaVersionError",
    "StateVersion",
    "Store",
    "StoreBusyError",
    "StoreNotFoundError",
    "Subscription",
    "ValidationError",
    "Wait",
    "Worker",
    "Workflow",
    "current_deadline",
    "observe",
    "open",
    "open_async",
    "workflow",
]
__version__ = "0.1.0"
