"""The mapper that keeps the agent's contents sealed, and large documents out of the row.

Each event class names its ``contents`` and the field naming the run that owns them
(docs/data.md, "What is contents and what is metadata"). Writing, each document whose JSON
is larger than ``inline_max`` moves to the artifact store, leaving an authenticated
reference; then the contents are encrypted together under the run's data key into the
body's ``$sealed`` member, bound to the event's topic, aggregate, version and run: moved to
another row, it no longer opens. Reading reverses both; contents that cannot be opened
(forgotten, no keyring) come back as stand-ins under a class that says so
(:mod:`actae.domain.custody`). A mapper made with ``reveal=False`` (the projector's) opens
nothing, so no plaintext reaches the read models.
"""

from __future__ import annotations

import base64
import binascii
import struct
from collections.abc import Iterator
from typing import Any, cast
from uuid import UUID

import orjson
from cryptography.exceptions import InvalidTag
from eventsourcing.domain import DomainEventProtocol
from eventsourcing.persistence import StoredEvent

from actae.adapters.custody.artifacts import Artifacts
from actae.adapters.custody.datakeys import DataKeys
from actae.adapters.custody.keyring import seal, unseal
from actae.adapters.persistence.awaiting import off_the_loop
from actae.adapters.persistence.codec import OrjsonTranscoder, PydanticMapper, stored_event_of
from actae.adapters.persistence.url import DEFAULT_INLINE_MAX
from actae.domain.aggregate import DomainEvent
from actae.domain.artifacts import reference_in
from actae.domain.channel import Channel
from actae.domain.custody import FORGOTTEN, LOCKED, stand_ins, withheld_class
from actae.domain.errors import CorruptionError, ForgottenError, KeyringError
from actae.domain.validation import Document

SEALED = "$sealed"
"""The member of a stored body that holds its encrypted contents (base64)."""
OFFLOADED = "$offloaded"
"""The member naming the contents that are artifact references (resolved when read)."""


class SealingMapper(PydanticMapper):
    """Pydantic events to stored events, with their contents sealed and offloaded."""

    def __init__(
        self,
        keys: DataKeys,
        *,
        offloader: Artifacts | None = None,
        inline_max: int = DEFAULT_INLINE_MAX,
        reveal: bool = True,
    ) -> None:
        super().__init__(transcoder=OrjsonTranscoder())
        self.keys = keys
        self.in_clear = keys.keyring is None  # a store without a keyring seals nothing
        self.inline_max = inline_max
        self.offloader = offloader
        self.reveal = reveal

    @property
    def offloader(self) -> Artifacts | None:
        """Where large documents go (``None``: they stay in the row), set once custody is made."""
        return self._offloader

    @offloader.setter
    def offloader(self, offloader: Artifacts | None) -> None:
        self._offloader = offloader
        self.offload_above = None if offloader is None else self.inline_max

    def without_contents(self) -> SealingMapper:
        """A mapper over the same keys that opens nothing (for read models)."""
        return SealingMapper(
            self.keys, offloader=self.offloader, inline_max=self.inline_max, reveal=False
        )

    # -- writing --------------------------------------------------------------------------

    def in_custody(
        self, domain_event: Any, topic: str, body: bytes, state: Document | None
    ) -> StoredEvent:
        """The row of an event with contents: sealed and offloaded where that applies.

        Asked by :meth:`PydanticMapper.to_stored_event` with the body the class's encoder
        wrote, when this store seals or the body is large; the field dict is built only when
        contents are to be taken out of it (an encrypted run, a large document).
        """
        cls: type[DomainEvent] = type(domain_event)
        owner = getattr(domain_event, cls.content_owner, None)
        if owner is not None:
            large = self.offloader is not None and len(body) > self.inline_max
            key = None
            if not self.in_clear or large:  # in clear, only a blob needs asking: it goes first
                key = self.keys.for_write(owner, born=isinstance(domain_event, Channel.Opened))
            if large or key is not None:
                _, fields = self.fields_of(domain_event)
                contents = dict(_taken(fields, cls.contents))
                offloaded = self._offload(owner, contents, key) if large else []
                if key is None:
                    _put_back(fields, contents)
                    if offloaded:
                        fields[OFFLOADED] = offloaded
                else:  # which contents are references is sealed with them
                    if offloaded:
                        contents[OFFLOADED] = offloaded
                    data = _bound(topic, domain_event, owner)
                    sealed = seal(key, orjson.dumps(contents), data)
                    fields[SEALED] = base64.b64encode(sealed).decode()
                body, state = self.transcoder.encode(fields), None
        return stored_event_of(domain_event, topic, body, state)

    def _offload(self, owner: UUID, contents: dict[str, Any], key: bytes | None) -> list[str]:
        """Replace each large document in ``contents`` by its reference; their paths."""
        assert self.offloader is not None  # noqa: S101 - checked by the caller
        moved = []
        for path, value in contents.items():
            if not isinstance(value, dict):
                continue
            data = orjson.dumps(value)
            if len(data) > self.inline_max:
                put = self.offloader.put  # off an async loop: it writes blobs
                ref = off_the_loop(put, owner, data, media_type="application/json", data_key=key)
                contents[path] = ref.as_document()
                moved.append(path)
        return moved

    # -- reading --------------------------------------------------------------------------

    def reads_heads(self) -> bool:
        """Whether a channel event whose body has only its class's fields is read as its head.

        Only in a store that never encrypted (a body with sealed or offloaded contents has a
        member of its own, and is read whole): anywhere else its contents may be withheld,
        or clear where they must not be, which the whole decode (:meth:`decoded`) finds out.
        """
        return not self.keys.ever_encrypted()

    def decoded(
        self, cls: type[DomainEvent], stored_event: StoredEvent, state: dict[str, Any]
    ) -> DomainEventProtocol[Any]:
        """Rebuild the event; open its contents, or stand them in and say why not.

        ``state`` is the body verified first (:meth:`body_of`): its checksum covers the
        clear metadata around the sealed contents, which AES-GCM authenticates only themselves.
        """
        if not cls.contents:
            return self.rebuilt(cls, stored_event, state)
        sealed = state.pop(SEALED, None)
        offloaded = state.pop(OFFLOADED, ())
        may_be_sealed = sealed is not None or offloaded or self.keys.ever_encrypted()
        owner = _owner(cls, stored_event, state) if may_be_sealed else None  # clear stores skip it
        key: bytes | None = None
        if sealed is not None:
            reason, key = self._opening(owner)
            if reason is not None or owner is None:
                stand_ins(cls, state)
                return self.rebuilt(withheld_class(cls, reason or LOCKED), stored_event, state)
            data = _bound(stored_event.topic, stored_event, owner)
            opened = orjson.loads(_opened(key, sealed, data, stored_event))
            offloaded = opened.pop(OFFLOADED, ())
            _put_back(state, opened)
        elif owner is not None and (why := self.keys.clear_allowed(owner)) is not None:
            if why == FORGOTTEN:
                stand_ins(cls, state)
                return self.rebuilt(withheld_class(cls, FORGOTTEN), stored_event, state)
            raise CorruptionError(
                f"event {stored_event.originator_id} at version {stored_event.originator_version}",
                f"contents in clear in run {owner}, which is encrypted (written without the "
                "keyring, or altered)",
            )
        if offloaded and self.offloader is not None and self.reveal:
            for path, value in _taken(state, tuple(offloaded), keep=True):
                ref = reference_in(value)
                if ref is None or ref.run_id != owner:
                    raise CorruptionError(
                        f"event {stored_event.originator_id}", f"{path} is not its reference"
                    )
                document = orjson.loads(off_the_loop(self.offloader.read, ref, data_key=key))
                _put_back(state, {path: document})
        return self.rebuilt(cls, stored_event, state)

    def _opening(self, owner: UUID | None) -> tuple[str | None, bytes]:
        """Why the owner's contents cannot be opened (``None``: they can), and its key."""
        if not self.reveal or owner is None:
            return LOCKED, b""
        try:
            key = self.keys.for_read(owner)
        except ForgottenError:
            return FORGOTTEN, b""
        except KeyringError:
            return LOCKED, b""
        return None, key


def _owner(cls: type[DomainEvent], stored_event: StoredEvent, state: dict[str, Any]) -> UUID | None:
    """The run whose key seals the event's contents, as the stored body names it."""
    if cls.content_owner == "originator_id":
        return cast(UUID, stored_event.originator_id)
    owner = state.get(cls.content_owner)
    return None if owner is None else UUID(str(owner))


def _taken(
    state: dict[str, Any], paths: tuple[str, ...], *, keep: bool = False
) -> Iterator[tuple[str, Any]]:
    """Each content path present in ``state`` and its value, removed unless ``keep``."""
    for path in paths:
        *parents, leaf = path.split(".")
        target: Any = state
        for name in parents:
            target = target.get(name) if isinstance(target, dict) else None
        if isinstance(target, dict) and leaf in target:
            yield path, (target[leaf] if keep else target.pop(leaf))


def _put_back(state: dict[str, Any], contents: dict[str, Any]) -> None:
    """Set each dotted path of ``contents`` in ``state``."""
    for path, value in contents.items():
        *parents, leaf = path.split(".")
        target = state
        for name in parents:
            target = target[name]
        target[leaf] = value


def _bound(topic: str, event: Any, owner: UUID) -> bytes:
    """The associated data: the ciphertext belongs to this event of this run, nowhere else."""
    originator: UUID = event.originator_id
    version = struct.pack(">q", event.originator_version)
    return b"actae sealed v1|" + topic.encode() + b"|" + originator.bytes + version + owner.bytes


def _opened(key: bytes, sealed: Any, data: bytes, stored_event: StoredEvent) -> bytes:
    """The plaintext of a body's ``$sealed`` (base64); ``CorruptionError`` if it does not open."""
    try:
        return unseal(key, base64.b64decode(sealed, validate=True), data)
    except (InvalidTag, binascii.Error, ValueError, TypeError):
        raise CorruptionError(
            f"event {stored_event.originator_id} at version {stored_event.originator_version}",
            "its sealed contents do not open with its run's key here (altered or moved?)",
        ) from None
