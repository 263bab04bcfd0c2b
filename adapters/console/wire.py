"""What the store's values look like as JSON: one shape each, whichever route sends it."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from fastapi.encoders import jsonable_encoder

from actae.adapters.operate import views
from actae.adapters.operate.versions import Change
from actae.adapters.operate.views import RunView
from actae.adapters.runtime.store import Store
from actae.domain.effects import EffectInfo, workflow_value
from actae.domain.values import ChannelEvent, ForkReceipt, StateVersion


def plain(value: dict[str, Any]) -> dict[str, Any]:
    """``value`` as JSON values only (uuids and datetimes as text, models as objects)."""
    document: dict[str, Any] = jsonable_encoder(value)
    return document


def run_document(view: RunView) -> dict[str, Any]:
    """A run in full: the store's word on it, its read-model row and its effects."""
    info = view.info
    return _fields(
        info,
        "run_id channel_id workflow_id agent_id",
        status=view.status,
        lifecycle=view.lifecycle,
        next_action=view.next_action,
        head_cursor=info.cursor,
        state_version=info.state_version,
        pins=info.pins.as_dict(),
        **_fields(info, "created_at deadline parent_run_id"),
        forked_from=None if info.forked_from is None else receipt_document(info.forked_from),
        waiting=None if info.waiting is None else info.waiting.model_dump(),
        decisions={name: d.model_dump() for name, d in info.decisions.items()},
        **_fields(info, "result error budget usage retries"),
        read_model=view.row,
        effects=view.effects,
    )


def _fields(of: Any, names: str, /, **more: Any) -> dict[str, Any]:
    """The attributes ``names`` (space-separated) of ``of``, then ``more``, as JSON."""
    return plain({name: getattr(of, name) for name in names.split()} | more)


def event_document(event: ChannelEvent) -> dict[str, Any]:
    """One event of a run's channel, as the timeline shows it."""
    names = "cursor kind state_version state_cursor operation_id payload"
    return _fields(event, names, timestamp=event.recorded_at)


def state_document(state: StateVersion) -> dict[str, Any]:
    """A state version: where it was made, its checksum and the state."""
    return _fields(state, "version cursor checksum state")


def change_document(change: Change) -> dict[str, Any]:
    """One difference between two states."""
    document: dict[str, Any] = {"path": list(change.path), "kind": change.kind}
    if change.kind != "added":
        document["before"] = change.before
    if change.kind != "removed":
        document["after"] = change.after
    return plain(document)


def receipt_document(receipt: ForkReceipt) -> dict[str, Any]:
    """A fork's receipt: where it was asked for, where it resolved, what it copied, why."""
    names = "parent_run_id child_run_id requested_boundary resolved_boundary state_version"
    return _fields(
        receipt,
        f"{names} state_checksum reason",
        pins=receipt.pins.as_dict(),
        operation_id=receipt.operation_id,
        created_at=receipt.created_at,
        inherited=None if receipt.inherited is None else receipt.inherited.model_dump(),
    )


def effect_document(info: EffectInfo) -> dict[str, Any]:
    """An effect with every attempt; ``value``: what ``ctx.effect`` returns (``result``: stored)."""
    return _fields(
        info,
        "effect_key run_id",
        status=info.status.value,
        **_fields(info, "token attempt holder expires_at retry_at in_doubt last_error result"),
        value=workflow_value(info.result),
        request=info.request,
        attempts=[attempt.model_dump() for attempt in info.attempts],
    )


NODE_COLUMNS = "workflow_id agent_id status head_cursor state_version model"
RECEIPT_COLUMNS = (  # a fork's receipt as the read model has it, if the store's is out of reach
    "requested_boundary resolved_boundary state_version state_checksum reason operation_id "
    "created_at"
)


def lineage_document(store: Store, run_id: UUID) -> dict[str, Any]:
    """``{"run_id", "nodes": [...], "edges": [...]}`` around ``run_id``."""
    lineage = store.lineage(run_id)
    receipts = {r.child_run_id: r for r in [*lineage.ancestors, *lineage.descendants]}
    first: dict[UUID, dict[str, Any]] = {}  # an edge per child: the nearest walk's
    for row in views.ancestry(store, run_id) + views.descendants(store, run_id):
        first.setdefault(row["child_run_id"], row)
    edges: list[dict[str, Any]] = []
    for child, row in first.items():
        edge: dict[str, Any] = {
            "parent": row["parent_run_id"],
            "child": child,
            "relation": row["relation"],
            "workflow_id": row["workflow_id"],
        }
        if row["relation"] == "fork":
            receipt = receipts.get(child)
            edge["receipt"] = (
                receipt_document(receipt)
                if receipt is not None
                else {name: row.get(name) for name in RECEIPT_COLUMNS.split()}
            )
        edges.append(edge)
    ids = [run_id, *(e["parent"] for e in edges), *(e["child"] for e in edges)]
    found = views.run_rows(store, ids)
    nodes = [
        {
            "run_id": node,
            "current": node == run_id,
            **{name: (found.get(node) or {}).get(name) for name in NODE_COLUMNS.split()},
        }
        for node in dict.fromkeys(ids)
    ]
    return plain({"run_id": run_id, "nodes": nodes, "edges": edges})
