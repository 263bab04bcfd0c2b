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
REDACTION_PATTERNS = ("tests/unit/test_redaction_patterns.py",)
CLEAR_INTO_KEYED = (
    "tests/custody/test_encryption.py::"
    "test_the_database_refuses_clear_contents_for_a_run_keyed_since_the_store_opened",
)

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
        "adapters/runtime/store.py",
        "        keys.forget(info.run_id)",
        "        keys.present([info.run_id])",
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
        "uncallable-redactor-called",
        "domain/redaction.py",
        "        if not callable(redactor):\n",
        "        if False:\n",
        "a per-call redact= that is no callable is a ValidationError, not a TypeError",
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
        "adapters/runtime/backends.py",
        'kept = "" if keep is None else " AND topic <> ?"',
        'kept = "" if keep is None else " AND ? IS NOT NULL"',
        "a purge keeps the run's tombstone: store.run reports purged_at",
        RETENTION,
    ),
    Mutant(
        "keyed-store-writes-in-clear",
        "adapters/persistence/codec.py",
        "if (not self.in_clear or (limit is not None and len(body) > limit)) and cls.contents:",
        "if (limit is not None and len(body) > limit) and cls.contents:",
        "a store with a keyring seals every event's contents: none may take the clear path",
        ENCRYPTION,
    ),
    Mutant(
        "large-documents-stay-in-the-row",
        "adapters/custody/sealing.py",
        "self.offload_above = None if offloader is None else self.inline_max",
        "self.offload_above = None",
        "a document larger than inline_max moves to the artifact store once custody is made",
        ARTIFACTS,
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
        "adapters/runtime/boundary.py",
        "- RUNNING_STATUSES - {RunStatus.WAITING}",
        "- RUNNING_STATUSES - {RunStatus.WAITING, RunStatus.FORGOTTEN}",
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
        "adapters/runtime/retention.py",
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
        "adapters/runtime/retention.py",
        "            if live:",
        "            if False:",
        "a forget cut short before its key was destroyed is finished by the next pass",
        EDGES,
    ),
    Mutant(
        "interrupted-purge-keeps-its-key",
        "adapters/runtime/retention.py",
        "if channel in with_events or r in with_keys",
        "if channel in with_events",
        "a purge cut short before its run's key was dropped is finished by the next pass",
        EDGES,
    ),
    Mutant(
        "child-purge-takes-the-parents-record",
        "adapters/runtime/retention.py",
        "                if not own_start and isinstance(event, Channel.Opened):",
        "                if False:",
        "purging a child leaves the parent's record of starting it (its replay finds it)",
        EDGES,
    ),
    Mutant(
        "kept-runs-crowd-out-due-ones",
        "adapters/readside/readmodels.py",
        "            elif own_agents:",
        "            elif False:",
        "retention's candidates are the due runs, not the oldest finished ones",
        EDGES,
    ),
    Mutant(
        "step-error-in-clear",
        "adapters/runtime/run_ledger.py",
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
        "ctx.store.forget(ref.run_id, actor=ctx.workflow_id, reason=why)",
        "ctx.store.run(ref.run_id)",
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
        "adapters/runtime/store.py",
        "RunTrace(run, sealed=store.encrypting)",
        "RunTrace(run)",
        "a step's span on an encrypted store says its error's type only",
        DISCLOSURE,
    ),
    Mutant(
        "sealed-stop-said-whole",
        "adapters/runtime/worker.py",
        "        if self.store.encrypting and not explained(stop):",
        "        if False:",
        "an unexplained stop on an encrypted store is named by its type, not its message",
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
        "            redact=reporting(found),",
        "            redact=None,",
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
    Mutant(
        "redactor-misses-passwd-key",
        "adapters/redaction/patterns.py",
        '        "passwd",\n',
        "",
        "a value under a key named passwd is a secret",
        REDACTION_PATTERNS,
    ),
    Mutant(
        "pem-blocks-kept",
        "adapters/redaction/patterns.py",
        '    "private_key": re.compile(_PRIVATE_KEY),\n',
        "",
        "a PEM private key block is redacted",
        REDACTION_PATTERNS,
    ),
    Mutant(
        "raw-jwts-kept",
        "adapters/redaction/patterns.py",
        '    "jwt": re.compile(_JWT),\n',
        "",
        "a raw JWT (not after Bearer) is redacted",
        REDACTION_PATTERNS,
    ),
    Mutant(
        "url-passwords-kept",
        "adapters/redaction/patterns.py",
        '    "url_password": re.compile(_URL_USERINFO),\n',
        "",
        "the password of a URL's user information is redacted",
        REDACTION_PATTERNS,
    ),
    Mutant(
        "hf-tokens-not-looked-for",
        "adapters/redaction/patterns.py",
        '|(?<=hf_))"',
        ')"',
        "a Hugging Face token is found: its hint must point at it",
        REDACTION_PATTERNS,
    ),
    Mutant(
        "dotted-cards-not-looked-for",
        "adapters/redaction/patterns.py",
        '        *_found(zeros, "0000.0000"),\n',
        "",
        "a card number written with dots is found",
        REDACTION_PATTERNS,
    ),
    Mutant(
        "partial-secret-takes-its-name",
        "adapters/redaction/patterns.py",
        '            start, end = match.span("secret")',
        "            pass",
        "only the secret goes: the URL's scheme, user and host, the header's name stay",
        REDACTION_PATTERNS,
    ),
    Mutant(
        "cookie-prose-redacted",
        "adapters/redaction/patterns.py",
        r"(?P<secret>[^\s;=]++=[^\r\n\x00]*+)",
        r"(?P<secret>[^\r\n\x00]++)",
        "prose about cookies is no cookie header (a false positive)",
        REDACTION_PATTERNS,
    ),
    Mutant(
        "assignment-colon-in-prose",
        "adapters/redaction/patterns.py",
        r"(?:=|:(?=[ \t]*+[\"" + "'" + r"]))",
        r"(?:=|:)",
        "'password: required' in prose is kept: ':' counts only before a quoted value",
        REDACTION_PATTERNS,
    ),
    Mutant(
        "digit-values-redacted",
        "adapters/redaction/patterns.py",
        r"""|(?![0-9]++(?![^\s\"',;&]))[^\s\"',;&]++)))""",
        r"""|[^\s\"',;&]++)))""",
        "a telling name holding only digits (a limit, a port) is kept",
        REDACTION_PATTERNS,
    ),
]

# -- issue 28, item 14: retention and holds follow lineage --------------------------------
LINEAGE = ("tests/custody/test_retention.py",)

CUSTODY_MUTANTS += [
    Mutant(
        "purge-ignores-lineage",
        "domain/keeping.py",
        "        if why is None or not lineage_lets_go(reader, kept, run, at):",
        "        if why is None:",
        "the tombstone is decided on the stored lineage: a hold placed after a pass listed"
        " the parent still keeps it",
        LINEAGE,
    ),
    Mutant(
        "retention-pass-ignores-lineage",
        "adapters/runtime/retention.py",
        "            return keeping.lineage_lets_go(self._service.reader, kept, run, now)",
        "            return True",
        "a pass (and its dry run) lists a parent only once its descendants let it go",
        LINEAGE,
    ),
    Mutant(
        "hold-not-inherited",
        "domain/keeping.py",
        "        if descendant.purged_at is None and kept.due(descendant, at) is None:",
        "        if descendant.purged_at is None and kept.due(descendant, at, ignoring_hold=True)"
        " is None:",
        "a hold on a fork or child protects the runs it inherits from",
        LINEAGE,
    ),
    Mutant(
        "grandchildren-unseen",
        "domain/keeping.py",
        "        waiting.extend(_inheritors(descendant))",
        "        pass",
        "a hold protects every ancestor, not only the parent",
        LINEAGE,
    ),
    Mutant(
        "delegated-children-unseen",
        "domain/keeping.py",
        "    return [fork.child_run_id for fork in run.forks] + list(run.children)",
        "    return [fork.child_run_id for fork in run.forks]",
        "a delegated child keeps its parent as a fork does",
        LINEAGE,
    ),
]

# -- issue 28, item 9: an approver's note is contents -------------------------------------
NOTES = ("tests/custody/test_sealed_notes.py",)

CUSTODY_MUTANTS += [
    Mutant(
        "approval-note-in-clear",
        "domain/run.py",
        '        contents: ClassVar[tuple[str, ...]] = ("decision.payload", "decision.note")',
        '        contents: ClassVar[tuple[str, ...]] = ("decision.payload",)',
        "a note is free text from the approver: sealed with the decision, gone with forget",
        NOTES,
    ),
    Mutant(
        "approval-note-presence-lost",
        "domain/lifecycle.py",
        "            noted=note is not None,",
        "            noted=False,",
        "the audit keeps that a note was given where the note itself is sealed",
        NOTES,
    ),
]

# -- issue 28, item 8: a forget is seen by every process at once ---------------------------
EVERYWHERE = ("tests/custody/test_forget_everywhere.py",)

CUSTODY_MUTANTS += [
    Mutant(
        "postgres-write-past-a-forget",
        "adapters/persistence/postgres.py",
        '                    " AND (wrapped IS NULL OR %s::boolean))), "',
        '                    " AND (FALSE OR %s::boolean))), "',
        "a write whose process still caches the key of a run forgotten elsewhere is refused"
        " by its own statement",
        EVERYWHERE,
        postgres=True,
    ),
    Mutant(
        "postgres-forgotten-refusal-silent",
        "adapters/persistence/postgres.py",
        "            refuse_keyed(self._execute(self._keys_query(), [owners]), in_clear=in_clear)",
        "            pass",
        "a write the key guard refused says why (a forgotten run, or a keyed run's clear"
        " contents), never returns as if written: a forgotten run's refusal would end as"
        " ForgottenError anyway (the retried command meets the new forget token), a keyed"
        " run's would be a lost race, retried until ContentionError",
        EVERYWHERE + CLEAR_INTO_KEYED,
        postgres=True,
    ),
    Mutant(
        "sqlite-write-past-a-forget",
        "adapters/persistence/offloaded.py",
        '            refuse_keyed(c.fetchall(), in_clear=bool(kwargs.get("in_clear", False)))',
        "            c.fetchall()",
        "SQLite's write transaction refuses a run whose key another process destroyed",
        EVERYWHERE,
    ),
    Mutant(
        "postgres-clear-write-to-a-keyed-run",
        "adapters/persistence/postgres.py",
        '                    " AND (wrapped IS NULL OR %s::boolean))), "',
        '                    " AND (wrapped IS NULL OR %s::boolean AND FALSE))), "',
        "a store without the keyring that still believes the store never encrypted adds no"
        " clear contents to a run keyed since: its insert statement refuses them",
        CLEAR_INTO_KEYED,
        postgres=True,
    ),
    Mutant(
        "sqlite-clear-write-to-a-keyed-run",
        "adapters/persistence/offloaded.py",
        '            refuse_keyed(c.fetchall(), in_clear=bool(kwargs.get("in_clear", False)))',
        "            refuse_keyed(c.fetchall(), in_clear=False)",
        "SQLite's write transaction refuses clear contents for a run that has a data key",
        CLEAR_INTO_KEYED,
    ),
    Mutant(
        "clear-blob-for-a-keyed-run",
        "adapters/custody/datakeys.py",
        "            refuse_keyed(keyed, in_clear=True)",
        "            pass",
        "a store without the keyring writes no clear blob (artifact, large document) for a"
        " keyed run: the blob goes before the insert that would refuse",
        CLEAR_INTO_KEYED,
    ),
    Mutant(
        "postgres-reads-ignore-forgets",
        "adapters/persistence/postgres.py",
        "            self.forgets.observe(rows[0][-1])",
        "            pass",
        "a read brings back the forget token: a key cached before a forget elsewhere is"
        " looked up again",
        EVERYWHERE,
        postgres=True,
    ),
    Mutant(
        "sqlite-reads-ignore-forgets",
        "adapters/persistence/offloaded.py",
        '        self.forgets.observe(None if row is None else row["value"])',
        "        del row",
        "a SQLite read looks at the forget token before its rows",
        EVERYWHERE,
    ),
    Mutant(
        "cached-key-outlives-a-forget",
        "adapters/custody/datakeys.py",
        "cached[0] >= time.monotonic() and cached[1] == version:",
        "cached[0] >= time.monotonic():",
        "a key cached before a forget token changed is not trusted",
        EVERYWHERE,
    ),
    Mutant(
        "forget-leaves-the-token",
        "adapters/custody/datakeys.py",
        "                run(conn, generation, TOKEN_NAME, new_token())",
        "                pass",
        "destroying a key replaces the forget token in the same transaction",
        EVERYWHERE,
    ),
    Mutant(
        "artifact-key-from-the-cache",
        "adapters/custody/holding.py",
        "self.keys.for_read(ref.run_id, fresh=True) if ref.sealed",
        "self.keys.for_read(ref.run_id) if ref.sealed",
        "opening an artifact asks the key table: no event read brings the token back first",
        EVERYWHERE,
    ),
]
