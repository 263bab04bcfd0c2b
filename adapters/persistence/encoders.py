"""Each event class's stored body, written straight from the event's validated values.

A field dict from ``model_dump`` handed to a transcoder costs, for a small event, about as
much as dumping it; so one encoder per event class is compiled on first use from the class's
pydantic definition alone. It copies the event's ``__dict__`` (pydantic fills it with the
``model_fields`` in their order however the event was made), drops the identity and dumps
nested models in place. No layout is written by hand; ``PydanticMapper.fields_of`` is the
reference it matches byte for byte (``tests/property/test_encoders.py``).
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

``state``: the validated document whose canonical bytes are written as they are, so the body
ends with the bytes the state checksum is of (:func:`actae.adapters.persistence.codec.stamped`)."""
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
    """What ``model_dump`` makes of a field that holds models: its declared type's fields only."""
    serialize: Callable[[Any], Any] = TypeAdapter(annotation).serializer.to_python
    return serialize
