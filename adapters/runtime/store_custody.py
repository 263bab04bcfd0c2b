"""The custody part of the public store: forgetting a run's contents.

:class:`actae.adapters.runtime.store.Store` inherits these.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, BinaryIO, cast
from uuid import UUID

import pydantic

from actae.adapters.custody.holding import Holding
from actae.adapters.persistence.awaiting import off_the_loop
from actae.adapters.runtime.service import ActaeService
from actae.domain import keeping
from actae.domain.artifacts import ArtifactRef, reference_in
from actae.domain.commands import Forget
from actae.domain.errors import ValidationError
from actae.domain.validation import require_uuid
from actae.domain.values import RunInfo


class CustodyMethods:
    """``Store`` methods about what the store keeps of a run's data."""

    _service: ActaeService
    _holding: Holding

    def forget(self, run_id: UUID | str, *, actor: str, reason: str) -> RunInfo:
        """Destroy the run's contents for good: crypto-shredding, audited with who and why.

        Its data key is destroyed, so its payloads, states, results and artifacts can never
        be read again, by this store or any other holding the same keyring. Its structure
        stays readable: ``run`` (status ``forgotten``), ``events`` (payloads ``None``,
        marked ``forgotten``), lineage and the audit trail; ``state_at``, ``recover`` and
        ``effect`` raise ``ForgottenError``. A live run is cancelled. Forks and children
        have keys of their own and are not forgotten with it. Asking again is harmless.

        Only a run written with encryption on has a key to destroy; for another,
        ``ValidationError`` (nothing written): purge it by retention instead.
        """
        command = Forget(run_id=run_id, actor=actor, reason=reason)
        run = self._service.reader.run(require_uuid("run_id", run_id))  # NotFoundError first
        keys = self._holding.keys
        if not keys.has_key(run.run_id):
            raise ValidationError(
                "run_id",
                f"run {run.run_id} was written without encryption: it has no key to destroy "
                "(open the store with a keyring to encrypt new runs; purge old ones by "
                "retention)",
            )
        info = self._service.execute(keeping.forget, command)
        keys.forget(info.run_id)
        return info

    def put_artifact(
        self,
        run_id: UUID | str,
        data_or_file: bytes | BinaryIO | os.PathLike[str],
        *,
        media_type: str = "application/octet-stream",
    ) -> ArtifactRef:
        """Store bytes for the run outside its event log; an authenticated reference.

        ``data_or_file`` is bytes, a binary file object (read in 1 MiB chunks) or a path:
        nothing is held in memory whole, so a file of any size streams through. Identical
        bytes are stored once (per run when the store encrypts: sealed under the run's data
        key, they go with it when it is forgotten). Keep the reference in a step result
        (``ref.model_dump(mode="json")``) and open it later with :meth:`open_artifact`.
        """
        run = self._service.reader.run(require_uuid("run_id", run_id))  # NotFoundError first
        data_key = self._holding.keys.for_write(run.run_id)
        return off_the_loop(
            self._holding.artifacts.put,
            run.run_id,
            data_or_file,
            media_type=media_type,
            data_key=data_key,
        )

    def open_artifact(self, ref: ArtifactRef | Mapping[str, Any]) -> BinaryIO:
        """A readable binary stream of the artifact ``ref`` names (from :meth:`put_artifact`).

        The reference's MAC is checked first, each chunk as it is read, and the size and
        SHA-256 before the last bytes are handed out: a tampered reference or blob raises
        ``CorruptionError``. ``ForgottenError`` once its run was forgotten.
        """
        checked = _reference(ref)
        data_key = self._holding.data_key_for_reading(checked)
        return cast(BinaryIO, self._holding.artifacts.open(checked, data_key=data_key))

    def rotate_keys(self, *, progress: Callable[[int], None] | None = None) -> int:
        """Re-wrap every run's data key under the keyring's current master key; how many.

        Payloads are not touched: only the wrapped keys change, in batches, each key
        checked and replaced atomically, so rotation may run while workers write and may be
        run again after an interruption (``actae keys rotate`` adds the new master key to
        the keyring file first). ``progress`` is told the count after each batch.
        """
        return self._holding.keys.rewrap_all(progress=progress)


def _reference(ref: object) -> ArtifactRef:
    """``ref`` as an :class:`ArtifactRef`: one, its JSON form, or a stored event's marker."""
    if isinstance(ref, ArtifactRef):
        return ref
    try:
        inside = reference_in(ref)
        if inside is not None:
            return inside
        return ArtifactRef.model_validate(ref)
    except pydantic.ValidationError as error:
        problem = error.errors()[0]
        where = ".".join(str(part) for part in problem["loc"]) or "ref"
        raise ValidationError(f"ref.{where}", problem["msg"]) from None
