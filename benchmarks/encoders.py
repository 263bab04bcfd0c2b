"""Encoders: what writing an event's stored body costs, compiled encoder against field dict.

Every store write passes its events through ``SealingMapper.to_stored_event``. Its body is
written by the event class's compiled encoder (``adapters/persistence/encoders.py``); the
baseline is the path before it: the field dict of ``fields_of`` (a copy of ``__dict__``, or
``model_dump`` for events with nested models) dumped by orjson. Both are measured on a
clear store (no keyring; what most events of most stores take), for the events of a
transition (``Channel.Transitioned``, the ~2 KB state of ``benchmarks.core``; and a
start's or fork's operation record, ``Operation.Executed``) and for an effect's
registration (a nested retry policy). Rows: the body alone, and the whole
``to_stored_event``. Timings interleave (``ROUNDS`` rounds of ``CALLS`` calls each, best
round kept), so a drifting machine treats both alike.

Run with ``python -m benchmarks.encoders`` (seconds; not part of ``make bench``).
"""

from __future__ import annotations

import timeit
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any, cast

import orjson
from eventsourcing.domain import DomainEventProtocol
from eventsourcing.persistence import StoredEvent

import actae
from actae.adapters.custody.datakeys import DataKeys, SqlKeyTable
from actae.adapters.custody.sealing import SealingMapper
from actae.adapters.persistence.encoders import encoder_for
from actae.domain.aggregate import DomainEvent
from actae.domain.channel import Channel
from actae.domain.effects import RetryPolicy
from actae.domain.operation import Operation
from actae.domain.validation import Document
from benchmarks.common import STATE

ROUNDS, CALLS = 15, 50_000


class DictMapper(SealingMapper):
    """The baseline: the body dumped from ``fields_of``'s dict (a clear store's path)."""

    def to_stored_event(
        self, domain_event: DomainEventProtocol[Any], state: Document | None = None
    ) -> StoredEvent:
        """As before the encoders, for an event that is neither sealed nor offloaded."""
        topic, fields = self.fields_of(domain_event)
        body = self.transcoder.encode(fields)
        cls = cast(type[DomainEvent], type(domain_event))
        owner = getattr(domain_event, cls.content_owner, None) if cls.contents else None
        if owner is not None:
            large = self.offloader is not None and len(body) > self.inline_max
            key = self.keys.for_write(owner, born=isinstance(domain_event, Channel.Opened))
            if large or key is not None:
                msg = "the baseline is measured on a clear store, with small documents"
                raise NotImplementedError(msg)
        return StoredEvent(
            originator_id=domain_event.originator_id,
            originator_version=domain_event.originator_version,
            topic=topic,
            state=body,
        )


def sample_events() -> dict[str, DomainEvent]:
    """One event of each measured kind, as a transition or an effect writes it."""
    at, run = datetime.now(UTC), uuid.uuid4()
    operation_id = f"{run}:4"
    return {
        "Channel.Transitioned": Channel.Transitioned(
            originator_id=run,
            originator_version=5,
            timestamp=at,
            run_id=run,
            kind="step",
            payload={"n": 4},
            operation_id=operation_id,
            state_version=5,
            state_cursor=5,
            state={**STATE, "step": 4},
            state_checksum="sha256:" + "0" * 64,
        ),
        "Operation.Executed": Operation.executed(
            operation_id=operation_id,
            command="transition",
            fingerprint="sha256:" + "1" * 64,
            result={"cursor": 5, "state_version": 5},
            at=at,
        ),
        "Operation.Registered": Operation.Registered(
            originator_id=uuid.uuid4(),
            originator_version=1,
            timestamp=at,
            originator_topic=Operation.type_name,
            operation_id="effect:1",
            run_id=run,
            channel_id=run,
            request={"to": "someone@example.com"},
            fingerprint="sha256:" + "2" * 64,
            policy=RetryPolicy(),
        ),
    }


def body_from_dict(mapper: SealingMapper, event: DomainEvent) -> bytes:
    """The baseline's body: ``fields_of``'s dict, dumped."""
    return orjson.dumps(mapper.fields_of(event)[1])


def best_us(calls: dict[str, Callable[[], object]]) -> dict[str, float]:
    """Microseconds per call of each, best of interleaved rounds."""
    best = dict.fromkeys(calls, float("inf"))
    for _ in range(ROUNDS):
        for name, call in calls.items():
            best[name] = min(best[name], timeit.timeit(call, number=CALLS) / CALLS * 1e6)
    return best


def main() -> None:
    store = actae.open("memory://")  # a clear store: its key table is never written
    keys = DataKeys(SqlKeyTable(store._backend.tables()), None)
    baseline, mapper = DictMapper(keys), SealingMapper(keys)
    print(f"{'event':22} {'measure':18} {'field dict µs':>13} {'encoder µs':>11} {'ratio':>6}")
    for name, event in sample_events().items():
        encode = encoder_for(type(event))
        assert encode(event) == orjson.dumps(baseline.fields_of(event)[1])
        rows = {
            "body": best_us(
                {
                    "dict": partial(body_from_dict, baseline, event),
                    "encoder": partial(encode, event),
                }
            ),
            "to_stored_event": best_us(
                {
                    "dict": partial(baseline.to_stored_event, event),
                    "encoder": partial(mapper.to_stored_event, event),
                }
            ),
        }
        for measure, us in rows.items():
            ratio = us["encoder"] / us["dict"]
            print(f"{name:22} {measure:18} {us['dict']:13.2f} {us['encoder']:11.2f} {ratio:6.2f}")


if __name__ == "__main__":
    main()
