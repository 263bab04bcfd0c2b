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
]
