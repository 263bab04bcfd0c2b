"""Actae: durable execution for LLM-agent runs on PostgreSQL (SQLite embedded by default).

``import actae`` gives the public contract; see README.md and DESIGN.md §3.
"""

from actae.adapters.migrations import SchemaVersionError
from actae.adapters.store import Store, open
from actae.domain.errors import (
    ActaeError,
    ConflictError,
    CorruptionError,
    FencingError,
    IncompatibleResumeError,
    LeaseHeldError,
    NotFoundError,
    OperationConflictError,
    ValidationError,
)
from actae.domain.values import (
    ChannelEvent,
    ForkReceipt,
    Lineage,
    Pins,
    Receipt,
    Recovery,
    RunInfo,
    RunStatus,
    StateVersion,
)

__all__ = [
    "ActaeError",
    "ChannelEvent",
    "ConflictError",
    "CorruptionError",
    "FencingError",
    "ForkReceipt",
    "IncompatibleResumeError",
    "LeaseHeldError",
    "Lineage",
    "NotFoundError",
    "OperationConflictError",
    "Pins",
    "Receipt",
    "Recovery",
    "RunInfo",
    "RunStatus",
    "SchemaVersionError",
    "StateVersion",
    "Store",
    "ValidationError",
    "open",
]
__version__ = "0.1.0"
