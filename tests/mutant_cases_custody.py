"""Mutants of the data's custody: encryption, forgetting, artifacts, redaction, retention.

Each weakens one guard of issue 17's features; ``make mutants`` checks a test notices.
"""

from __future__ import annotations

from tests.mutant_cases import Mutant

ENCRYPTION = ("tests/custody/test_encryption.py",)
FORGET = ("tests/custody/test_forget.py",)
ARTIFACTS = ("tests/custody/test_artifacts.py", "tests/custody/test_store_artifacts.py")
REDACTION = ("tests/custody/test_redaction_store.py",)
RETENTION = ("tests/custody/test_retention.py", "tests/unit/test_retention_policy.py")
EDGES = ("tests/custody/test_custody_edges.py",)
DISCLOSURE = ("tests/telemetry/test_sealed_errors.py",)
LANGGRAPH_REDACTION = ("tests/langgraph/test_redaction.py",)

CUSTODY_MUTANTS = [
    Mutant(
        "ciphertext-not-bound-to-its-row",
        "adapters/custody/sealing.py",
        '    version = struct.pack(">q", event.originator_version)',
        '    version = b""',
        "a sealed body copied to another cursor of the run must not open there",
        ENCRYPTION,
    ),
    Mutant(
        "read-models-opened",
        "adapters/custody/holding.py",
        "        self.metadata_mapper = self.mapper.without_contents()",
        "        self.metadata_mapper = self.mapper",
        "the projector must not copy decrypted contents into the read models",
        ("tests/custody/test_encryption.py::test_no_table_of_the_schema_holds_the_plaintext",),
        postgres=True,
    ),
    Mutant(
        "forget-keeps-the-key",
        "adapters/runtime/store_custody.py",
        "        keys.forget(info.run_id)",
        "        keys.has_key(info.run_id)",
        "forgetting must destroy the data key, not only say so",
        FORGET,
    ),
    Mutant(
        "forgotten-state-handed-out",
        "domain/reader.py",
        "        ensure_readable(source, source.run_id)\n",
        "",
        "a state that cannot be opened must be refused, not returned as an empty stand-in",
        FORGET,
    ),
    Mutant(
        "reference-mac-unchecked",
        "adapters/custody/artifacts.py",
        "        if not hmac.compare_digest(expected, ref.mac):",
        "        if False:",
        "a changed reference (size, run, media type) must raise CorruptionError",
        ARTIFACTS,
    ),
    Mutant(
        "artifact-digest-unchecked",
        "adapters/custody/reading.py",
        "        if self._hash.hexdigest() != self.ref.digest:",
        "        if False:",
        "bytes changed under a reference must raise CorruptionError before end of file",
        ARTIFACTS,
    ),
    Mutant(
        "redactors-skipped",
        "domain/pipeline.py",
        "        redactors = [r for r in (first, self.redact) if r is not None]",
        "        redactors: list[Redactor] = []",
        "records and results must be redacted before they are written",
        REDACTION,
    ),
    Mutant(
        "hold-ignored",
        "domain/retention.py",
        "        if run.held and not ignoring_hold:",
        "        if False:",
        "a run on legal hold must never be purged",
        RETENTION,
    ),
    Mutant(
        "purged-a-moment-early",
        "domain/retention.py",
        "        if seconds is None or run.ended_at + timedelta(seconds=seconds) > now:",
        "        if seconds is None or run.ended_at + timedelta(seconds=seconds - 1) > now:",
        "a run is purged when its end plus its policy's time has passed, not before",
        RETENTION,
    ),
    Mutant(
        "tombstone-deleted-with-the-history",
        "adapters/persistence/offloaded.py",
        "                        if keep is not None and "
        "self._stored_events[position].topic == keep:",
        "                        if False:",
        "a purge keeps the run's tombstone: store.run reports purged_at",
        RETENTION,
    ),
    Mutant(
        "clear-run-gets-a-key-later",
        "adapters/custody/sealing.py",
        "born=isinstance(domain_event, Channel.Opened)",
        "born=True",
        "a run born in clear stays in clear: forgetting it must not pretend to shred it",
        EDGES,
    ),
    Mutant(
        "forgotten-run-goes-on",
        "adapters/runtime/context.py",
        "        RunStatus.FORGOTTEN,\n",
        "",
        "a live run that is forgotten stops at its next step boundary",
        EDGES,
    ),
    Mutant(
        "rotation-not-followed",
        "adapters/custody/datakeys.py",
        "        if stored.master_key not in keyring.secrets and keyring.path is not None:",
        "        if False:",
        "a running process reads the keyring again when a rotation wrapped keys anew",
        EDGES,
    ),
    Mutant(
        "interrupted-purge-left-behind",
        "adapters/runtime/store_retention.py",
        "            self._finish_interrupted(projector, now)",
        "            pass",
        "a purge or forget cut short by a crash is finished by the next pass",
        EDGES,
    ),
    Mutant(
        "duplicate-written-again",
        "adapters/custody/artifacts.py",
        "        if not self.blobs.has(self._name(probe.hexdigest(), run_id, key)):",
        "        if True:",
        "bytes already stored are not written again: their name is looked up first",
        ARTIFACTS,
    ),
    Mutant(
        "interrupted-forget-keeps-its-key",
        "adapters/runtime/store_retention.py",
        "            if live:",
        "            if False:",
        "a forget cut short before its key was destroyed is finished by the next pass",
        EDGES,
    ),
    Mutant(
        "interrupted-purge-keeps-its-key",
        "adapters/runtime/store_retention.py",
        "if channel in with_events or r in with_keys",
        "if channel in with_events",
        "a purge cut short before its run's key was dropped is finished by the next pass",
        EDGES,
    ),
    Mutant(
        "child-purge-takes-the-parents-record",
        "adapters/runtime/store_retention.py",
        "                if not own_start and isinstance(event, Channel.Opened):",
        "                if False:",
        "purging a child leaves the parent's record of starting it (its replay finds it)",
        EDGES,
    ),
    Mutant(
        "kept-runs-crowd-out-due-ones",
        "adapters/readside/worker_tables.py",
        "            elif own_agents:",
        "            elif False:",
        "retention's candidates are the due runs, not the oldest finished ones",
        EDGES,
    ),
    Mutant(
        "step-error-in-clear",
        "adapters/runtime/context_retries.py",
        "reason=gave_up[:MAX_REASON_LENGTH]",
        "reason=reason[:MAX_REASON_LENGTH]",
        "an abandonment's reason is metadata: a step's error must not be copied into it",
        (
            "tests/custody/test_custody_edges.py::test_a_steps_error_stays_sealed_when_its_retries_run_out",
        ),
        postgres=True,
    ),
    Mutant(
        "langgraph-delete-only-ends",
        "adapters/langgraph/forgetting.py",
        "Store.forget, ref.run_id, actor=ctx.workflow_id, reason=why",
        "Store.run, ref.run_id",
        "LangGraph's delete_thread crypto-shreds an encrypted thread, as store.forget does",
        ("tests/langgraph/test_saver.py",),
    ),
    # -- contents that leak: logs, spans, LangGraph blobs, the redactor (issue 28) ------------
    Mutant(
        "sealed-error-message-in-logs",
        "domain/disclosure.py",
        "    if not sealed:\n",
        "    if True:\n",
        "on an encrypted store a log line or span names an error by type, never by its message",
        DISCLOSURE,
    ),
    Mutant(
        "sealed-exception-recorded-whole",
        "adapters/telemetry/tracing.py",
        "            if sealed:\n",
        "            if False:\n",
        "on an encrypted store a span's exception event carries no message and no traceback",
        DISCLOSURE,
    ),
    Mutant(
        "call-spans-not-sealed",
        "adapters/runtime/context.py",
        "RunTrace(run, sealed=store.encrypting)",
        "RunTrace(run)",
        "a step's span on an encrypted store says its error's type only",
        DISCLOSURE,
    ),
    Mutant(
        "start-span-named-by-workflow-id",
        "adapters/runtime/store.py",
        "tracing.span_name(START_SPAN, agent_id)",
        "tracing.span_name(START_SPAN, workflow_id)",
        "span names carry the agent, never a workflow id",
        DISCLOSURE,
    ),
    Mutant(
        "langgraph-writes-packed-unredacted",
        "adapters/langgraph/writing.py",
        "    indexed, found = _redacted_writes(ctx, indexed)",
        "    found: Found = {}",
        "redact= reaches inside the serde blobs of a task's pending writes",
        LANGGRAPH_REDACTION,
    ),
    Mutant(
        "langgraph-checkpoint-packed-unredacted",
        "adapters/langgraph/writing.py",
        "    checkpoint, stored, found = _redacted_checkpoint(ctx, checkpoint, stored)",
        "    found: Found = {}",
        "redact= reaches inside the serde blobs of a checkpoint's channel values",
        LANGGRAPH_REDACTION,
    ),
    Mutant(
        "langgraph-writes-counts-dropped",
        "adapters/langgraph/writing.py",
        "                redact=reporting(found),",
        "                redact=None,",
        "a langgraph.writes record counts what was redacted, like any record",
        LANGGRAPH_REDACTION,
    ),
    Mutant(
        "langgraph-checkpoint-counts-dropped",
        "adapters/langgraph/encoding.py",
        "    if redacted:",
        "    if False:",
        "a checkpoint's payload counts what was redacted from it",
        LANGGRAPH_REDACTION,
    ),
    Mutant(
        "langgraph-opaque-blob-kept",
        "adapters/langgraph/redacting.py",
        "        raise _unredactable(value, where)",
        "        return value",
        "a value the redactor cannot look inside is refused under redact=, never stored",
        LANGGRAPH_REDACTION,
    ),
]
