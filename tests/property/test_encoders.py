"""Property: each event class's compiled encoder writes the reference mapper's bytes.

The reference is ``orjson.dumps(PydanticMapper.fields_of(event))`` (what stores wrote before
the encoders; ``adapters/persistence/encoders.py``). Every ``DomainEvent`` subclass defined
in ``actae.domain`` is found by importing its modules and walking subclasses, so a new event
class is covered without a change here. Field values are drawn from the fields' annotations
(any JSON for ``Any``: unicode, nesting, integers up to 2**63, floats, ``None``); instances
the class refuses are rejected.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import types
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, Literal, Union, cast, get_args, get_origin

import annotated_types
import orjson
import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

import actae.domain
from actae.adapters.custody.datakeys import DataKeys, SqlKeyTable
from actae.adapters.custody.sealing import SealingMapper
from actae.adapters.persistence.codec import OrjsonTranscoder, PydanticMapper, verified
from actae.adapters.persistence.encoders import encoder_for
from actae.domain.aggregate import DomainEvent
from actae.domain.type_names import BASES, declared_names

MAPPER = PydanticMapper(transcoder=OrjsonTranscoder())
KEYS_OF = actae.open("memory://")
"""A clear store, open for the module: its key table is the clear mapper's."""
CLEAR_STORE = SealingMapper(DataKeys(SqlKeyTable(KEYS_OF._backend.tables()), None))
WIDE = 2**63
JSON: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-WIDE, max_value=WIDE)
    | st.floats()
    | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)
TIMEZONES = (
    st.none()
    | st.just(UTC)
    | st.integers(-1439, 1439).map(lambda minutes: timezone(timedelta(minutes=minutes)))
)


def event_classes() -> list[type[DomainEvent]]:
    """Every event class of ``actae.domain`` that a stored topic can name.

    Stand-ins for withheld contents are left out, and so are the base classes (``Event``,
    ``Created``, ``Acted``: no type name of their own) and the classes an aggregate's body
    declares when eventsourcing redefines them on the aggregate's own ``Event``: the
    redefinition takes their name, and only it is ever written.
    """
    for module in pkgutil.walk_packages(actae.domain.__path__, "actae.domain."):
        importlib.import_module(module.name)
    found: set[type[DomainEvent]] = set()
    waiting: list[type[DomainEvent]] = DomainEvent.__subclasses__()
    while waiting:
        cls = waiting.pop()
        if (
            cls.__module__.startswith("actae.domain.")
            and cls.withheld is None
            and cls.__name__ not in BASES
            and hasattr(cls, "type_name")
            and named(cls)
        ):
            found.add(cls)
        waiting.extend(cls.__subclasses__())
    return sorted(found, key=lambda cls: (cls.__module__, cls.__qualname__))


def named(cls: type) -> bool:
    """Whether ``cls`` is what its module and qualified name resolve to."""
    target: Any = sys.modules[cls.__module__]
    for name in cls.__qualname__.split("."):
        target = getattr(target, name, None)
    return target is cls


CLASSES = event_classes()


SCALARS: dict[Any, st.SearchStrategy[Any]] = {
    Any: JSON,
    type(None): st.none(),
    bool: st.booleans(),
    str: st.text(),
    uuid.UUID: st.uuids(),
    datetime: st.datetimes(timezones=TIMEZONES),
}


def values_of(annotation: Any, metadata: Sequence[Any] = ()) -> st.SearchStrategy[Any]:
    """Values of ``annotation`` (models as dicts, validated with the event)."""
    if annotation in SCALARS:
        return SCALARS[annotation]
    if annotation is int:
        return st.integers(**bounds(metadata, -WIDE, WIDE, integral=True))
    if annotation is float:
        return st.floats(**bounds(metadata, None, None, integral=False))
    if get_origin(annotation) is not None:
        return composed(get_origin(annotation), get_args(annotation))
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return fields_of_model(annotation)
    return st.from_type(annotation)  # enums, and whatever a new field may use


def composed(origin: Any, arguments: tuple[Any, ...]) -> st.SearchStrategy[Any]:
    """Values of a union, literal or container type."""
    if origin is Union or origin is types.UnionType:
        return st.one_of([values_of(argument) for argument in arguments])
    if origin is Literal:
        return st.sampled_from(arguments)
    if origin is dict:
        return st.dictionaries(values_of(arguments[0]), values_of(arguments[1]), max_size=3)
    if origin is tuple and arguments[-1] is not Ellipsis:
        return st.tuples(*(values_of(argument) for argument in arguments))
    items = st.lists(values_of(arguments[0]), max_size=3)
    return items.map(tuple) if origin is tuple else items  # list[X], tuple[X, ...]


def bounds(metadata: Any, low: Any, high: Any, *, integral: bool) -> dict[str, Any]:
    """The range a number field's constraints allow (so few draws are refused)."""
    step = 1 if integral else 0
    found: dict[str, Any] = {"min_value": low, "max_value": high}
    for constraint in metadata:
        if isinstance(constraint, annotated_types.Ge):
            found["min_value"] = constraint.ge
        elif isinstance(constraint, annotated_types.Gt):
            found["min_value"] = cast(Any, constraint.gt) + step
            found["exclude_min"] = not integral
        elif isinstance(constraint, annotated_types.Le):
            found["max_value"] = constraint.le
        elif isinstance(constraint, annotated_types.Lt):
            found["max_value"] = cast(Any, constraint.lt) - step
            found["exclude_max"] = not integral
        elif getattr(constraint, "allow_inf_nan", True) is False:
            found["allow_nan"] = found["allow_infinity"] = False
    return found


def fields_of_model(model: type[BaseModel]) -> st.SearchStrategy[dict[str, Any]]:
    """A dict for ``model``: every required field, some of the others (keyed by alias)."""
    required: dict[str, st.SearchStrategy[Any]] = {}
    optional: dict[str, st.SearchStrategy[Any]] = {}
    for name, field in model.model_fields.items():
        key = field.alias or name
        values = values_of(field.annotation, field.metadata)
        (required if field.is_required() else optional)[key] = values
    return st.fixed_dictionaries(required, optional=optional)


def events(cls: type[DomainEvent]) -> st.SearchStrategy[DomainEvent]:
    """Instances of ``cls``, as its validators accept them (a first event names its aggregate)."""

    def made(values: dict[str, Any]) -> DomainEvent:
        try:
            return cls.model_validate(values)
        except ValidationError:
            reject()

    values = fields_of_model(cls)
    if "originator_topic" in cls.model_fields:
        aggregate = cls.type_name.partition(".")[0]
        values = values.map(lambda drawn: {**drawn, "originator_topic": aggregate})
    return values.map(made)


def outcome(encode: Any, event: DomainEvent) -> bytes | str:
    """The bytes ``encode`` writes, or that orjson refused the values (both must agree)."""
    try:
        result: bytes = encode(event)
    except orjson.JSONEncodeError:
        return "refused"
    return result


def test_every_stored_event_class_is_found() -> None:
    """The walk finds exactly the event classes that declare a type name: none is missed."""
    named_events = {cls for cls in declared_names().values() if issubclass(cls, DomainEvent)}
    assert set(CLASSES) == named_events


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__qualname__)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_encoder_writes_the_reference_bytes(
    cls: type[DomainEvent], data: st.DataObject
) -> None:
    event = data.draw(events(cls))

    reference = outcome(lambda event: orjson.dumps(MAPPER.fields_of(event)[1]), event)

    assert outcome(encoder_for(cls), event) == reference
    assert outcome(lambda event: verified(MAPPER.to_stored_event(event)), event) == reference
    assert outcome(lambda event: verified(CLEAR_STORE.to_stored_event(event)), event) == reference
    assert list(event.__dict__) == list(cls.model_fields)  # what the encoder relies on
