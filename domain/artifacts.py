"""Artifact references: bytes kept outside the event log, named by SHA-256, size and type.

A MAC made with a key the store holds makes a forged or repointed reference detectable.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from pydantic import Field

from actae.domain.aggregate import Value

ARTIFACT_MARKER = "$artifact"
"""The one key of the JSON object that stands for an offloaded document in a stored event."""


class ArtifactRef(Value):
    """An authenticated reference to an artifact (see :meth:`actae.Store.put_artifact`)."""

    digest: str = Field(pattern=r"^[0-9a-f]{64}$")
    """SHA-256 of the artifact's bytes (before any encryption), lower-case hex."""
    size: int = Field(ge=0)
    """Its length in bytes."""
    media_type: str = Field(min_length=1, max_length=255)
    run_id: UUID
    """The run that owns it: its data key seals it, forgetting or purging the run drops it."""
    sealed: bool = False
    """Whether its bytes are encrypted under the run's data key."""
    key: str = Field(min_length=1, max_length=128)
    """Which key made ``mac``: a keyring key's id, or ``store`` for the store's own."""
    mac: str = Field(pattern=r"^[0-9a-f]{64}$")
    """HMAC-SHA256 over the digest, size, media type and run id."""

    def as_document(self) -> dict[str, Any]:
        """The JSON object a stored event holds in place of the document."""
        return {ARTIFACT_MARKER: self.model_dump(mode="json")}


def reference_in(value: Any) -> ArtifactRef | None:
    """The reference ``value`` stands for, if it is one (see :meth:`ArtifactRef.as_document`)."""
    if isinstance(value, dict) and len(value) == 1 and ARTIFACT_MARKER in value:
        return ArtifactRef.model_validate(value[ARTIFACT_MARKER])
    return None
