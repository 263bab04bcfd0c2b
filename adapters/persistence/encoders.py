"""Each event class's stored body, written straight from the event's validated values.

Every store write turns events into bytes (a transition, a record, a claim, a completion).
Asking the mapper for a field dict first (``model_dump`` for events with nested models) and
handing it to a transcoder costs, for a small event, about as much as dumping it. So one
encoder per event class is derived, on first use, from the class's pydantic definition and
nothing else: the fields the row holds instead (the identity), the fields that hold nested
models (dumped by a serializer built from the field's type, as ``model_dump`` dumps them).
It is compiled into one function.

The function copies the event's ``__dict__``: pydantic fills it with exactly the class's
``model_fields``, in their order, however the event was made (validation, ``model_construct``,
``model_copy``), so the copy is the body's fields in the definition's order. The copy costs
less than half of building the same dict key by key (``docs/performance.md``).

There is no layout written by hand: a new field or nested model changes the encoder with
the class. ``PydanticMapper.fields_of`` stays the reference it must match byte
for byte (``tests/property/test_encoders.py``, over every event class in ``actae.domain``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any, get_args

import orjson
from pydantic import BaseModel, TypeAdapter

IDENTITY = frozenset({"originator_id", "originator_version"})
"""Fields stored in the event's row, not in its JSON body."""

Encoder = Callable[..., bytes]
"""An event's stored body (the JSON ``OrjsonTranscoder`` decodes): ``encode(event, state=None)``."""

SOURCE = """\
def encode(event, state=None):
    values = event.__dict__.copy()
    del {identity}
{steps}    return dumps(values)
"""
"""The encoder: the fields less the identity, nested models dumped in place, one ``dumps``.

``state``, for a class whose last field is ``state``: that field's validated document
(``actae.domain.validation.Document``), whose canonical bytes are written in its place as
they are: the body then ends with exactly the bytes of which the state checksum is the
SHA-256 (:func:`actae.adapters.persistence.codec.stamped`)."""
STATE_STEP = """\
    if state is not None:
        values["state"] = fragment(state.canonical)
"""


def holds_models(annotation: Any) -> bool:
    """Whether a field's type is, or contains, a pydantic model (which orjson cannot encode)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return True
    return any(holds_models(argument) for argument in get_args(annotation))


@cache
def encoder_for(cls: type[BaseModel]) -> Encoder:
    """The encoder of ``cls``'s stored body, derived from its definition once."""
    namespace: dict[str, Any] = {"dumps": orjson.dumps, "fragment": orjson.Fragment}
    steps = []
    for index, (name, field) in enumerate(cls.model_fields.items()):
        if name not in IDENTITY and holds_models(field.annotation):
            namespace[f"dump_{index}"] = _serializer(field.annotation)
            steps.append(f"    values[{name!r}] = dump_{index}(values[{name!r}])\n")
    if list(cls.model_fields)[-1] == "state":
        steps.append(STATE_STEP)
    identity = ", ".join(f"values[{name!r}]" for name in sorted(IDENTITY))
    source = SOURCE.format(identity=identity, steps="".join(steps))
    # Safe to run: field names are identifiers, quoted by repr.
    exec(compile(source, f"<encoder of {cls.__qualname__}>", "exec"), namespace)  # noqa: S102
    encode: Encoder = namespace["encode"]
    return encode


def _serializer(annotation: Any) -> Callable[[Any], Any]:
    """What ``model_dump`` makes of a field that holds models (dicts, in lists, or ``None``).

    Built from the field's declared type, as the model's own serializer is: a subclass of
    the declared model (a ``ForkReceipt`` where a ``ForkRecord`` is declared) is dumped with
    the declared fields only, as ``model_dump`` does.
    """
    serialize: Callable[[Any], Any] = TypeAdapter(annotation).serializer.to_python
    return serialize
