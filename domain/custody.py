"""Events whose contents cannot be read: forgotten runs, and encrypted runs without a key.

Such an event decodes with neutral stand-ins for its contents on a subclass whose ``withheld`` says
why, so metadata reads keep working; :func:`ensure_readable` refuses the contents.
"""

from __future__ import annotations

import types
from functools import cache
from typing import Any, TypeVar, Union, get_args, get_origin
from uuid import UUID

from actae.domain.aggregate import DomainEvent
from actae.domain.errors import ForgottenError, KeyringError

FORGOTTEN = "forgotten"
"""The run's data key was destroyed (``store.forget``)."""
LOCKED = "locked"
"""The contents are encrypted and the store was opened without a key that opens them."""
WITHHELD = (FORGOTTEN, LOCKED)

E = TypeVar("E", bound=DomainEvent)


@cache
def withheld_class(cls: type[E], reason: str) -> type[E]:
    """A subclass of ``cls`` (``isinstance`` holds) whose contents are withheld for ``reason``."""
    if reason not in WITHHELD:
        msg = f"unknown reason {reason!r}"
        raise ValueError(msg)
    namespace = {"__module__": cls.__module__, "__qualname__": cls.__qualname__, "withheld": reason}
    return types.new_class(cls.__name__, (cls,), {}, lambda ns: ns.update(namespace))


def stand_ins(cls: type[DomainEvent], state: dict[str, Any]) -> None:
    """Put a neutral value in ``state`` for each of ``cls``'s contents (in place)."""
    for path in cls.contents:
        *parents, leaf = path.split(".")
        target: Any = state
        model: Any = cls
        for name in parents:
            target = target.setdefault(name, {})
            model = _model_of(model.model_fields[name].annotation)
        target[leaf] = _neutral(model.model_fields[leaf].annotation)


def _model_of(annotation: Any) -> Any:
    """The model class inside an annotation such as ``Decision`` or ``Decision | None``."""
    for candidate in (annotation, *get_args(annotation)):
        if isinstance(candidate, type) and hasattr(candidate, "model_fields"):
            return candidate
    msg = f"no model in {annotation!r}"
    raise TypeError(msg)


def _neutral(annotation: Any) -> Any:
    """``None`` where the field allows it, else an empty value of its type."""
    arguments = get_args(annotation)
    origin = get_origin(annotation)
    if (origin is Union or origin is types.UnionType) and type(None) in arguments:
        return None
    if annotation is str:
        return ""
    return {}


def ensure_readable(event: DomainEvent, run_id: UUID) -> None:
    """Refuse to hand out ``event``'s contents when they are withheld."""
    reason = type(event).withheld
    if reason == FORGOTTEN:
        raise ForgottenError(run_id)
    if reason == LOCKED:
        raise locked(run_id)


def locked(run_id: UUID | None) -> KeyringError:
    """The refusal of encrypted contents (of ``run_id``) without the keyring that opens them."""
    whose = "these contents are" if run_id is None else f"run {run_id}'s contents are"
    return KeyringError(
        f"{whose} encrypted: open the store with the keyring that wrapped its data key "
        "(actae.open(url, keyring=path) or ?keyring=path)"
    )
