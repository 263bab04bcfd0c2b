"""Resuming a run: a worker's compatibility check and state-schema migrations.

A run is pinned to a model, prompt, tool contract and state schema. A worker whose pins
differ is refused; an older schema is upgraded by the worker's migrations, one schema at a
time, each from the state it was computed on (a stale one is re-decided, never applied).
:class:`actae.adapters.runtime.store.Store` inherits these methods.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, cast
from uuid import UUID

from actae.adapters.runtime.context import RunContext
from actae.adapters.runtime.service import ActaeService
from actae.domain import lifecycle
from actae.domain.commands import Upgrade
from actae.domain.errors import (
    IncompatibleResumeError,
)
from actae.domain.reader import StoreReader
from actae.domain.redaction import Redactor
from actae.domain.validation import require_pins, require_text
from actae.domain.values import Pins, Receipt, RunInfo, StateVersion

if TYPE_CHECKING:
    from actae.adapters.runtime.store import Store

Migration = Callable[[dict[str, Any]], dict[str, Any]]
"""Upgrades a state of schema n to schema n + 1."""


class ResumeMethods:
    """``Store.resume`` and the migrations it applies."""

    _service: ActaeService
    _reader: StoreReader

    if TYPE_CHECKING:  # provided by Store

        def run(self, run_id: UUID | str) -> RunInfo:
            """The run as the store knows it now."""
            ...

        def head(self, channel_id: UUID | str) -> Receipt:
            """The channel's last event."""
            ...

        def state_at(self, channel_id: UUID | str, cursor: int | None = None) -> StateVersion:
            """The state version in force at ``cursor``."""
            ...

    def resume(
        self,
        run_id: UUID | str,
        *,
        worker: str,
        pins: Mapping[str, Any] | None = None,
        migrations: Mapping[int, Migration] | None = None,
        redact: Redactor | None = None,
    ) -> RunContext:
        """A durable-step context for ``run_id`` driven by ``worker``.

        ``redact`` (the workflow's redactor) removes secrets from its step results, records
        and effect results before the store's own redactor does.

        ``pins`` are the worker's: a run pinned to another model, prompt or tool contract is
        refused with ``IncompatibleResumeError``. A run on an older state schema is upgraded
        by ``migrations[n]`` (state of schema n -> state of schema n + 1), each recorded as a
        new state version; without the needed migration the resume is refused.
        """
        worker = require_text("worker", worker)
        run = self.run(run_id)
        if pins:
            run = self._reconcile_pins(run, require_pins("pins", pins), migrations or {}, worker)
        return RunContext(cast("Store", self), run, worker, self._reader, redact=redact)

    def _reconcile_pins(
        self, run: RunInfo, wanted: Pins, migrations: Mapping[int, Migration], worker: str
    ) -> RunInfo:
        differences: dict[str, tuple[Any, Any]] = {
            name: (run.pins[name], wanted[name])
            for name in ("model", "prompt", "tools")
            if wanted[name] is not None and run.pins[name] != wanted[name]
        }
        current, target = run.pins.schema_ or 1, wanted.schema_
        steps = [] if target is None else list(range(current, target))
        if target is not None and (current > target or any(s not in migrations for s in steps)):
            differences["schema"] = (current, target)
        if differences:
            raise IncompatibleResumeError(run.run_id, differences)
        if target is None or not steps:
            return run
        command = Upgrade(run_id=run.run_id, target=target, migrations=migrations, actor=worker)
        return self._service.execute(lifecycle.upgrade, command)
