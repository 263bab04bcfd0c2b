"""The lineage around a run as a graph: runs as nodes, forks and delegations as edges.

Edges come from the lineage read model, up to the root and down through every fork and
child. A fork edge carries its receipt as the store keeps it (``store.lineage``), so the
graph shows what the store would prove.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from actae.adapters.console.wire import plain, receipt_document
from actae.adapters.operate import views
from actae.adapters.runtime.store import Store

NODE_COLUMNS = ("workflow_id", "agent_id", "status", "head_cursor", "state_version", "model")
"""What a node shows of its run."""
RECEIPT_COLUMNS = (
    "requested_boundary",
    "resolved_boundary",
    "state_version",
    "state_checksum",
    "reason",
    "operation_id",
    "created_at",
)
"""A fork's receipt as the read model has it (used when the store's is out of reach)."""


def lineage_document(store: Store, run_id: UUID) -> dict[str, Any]:
    """``{"run_id", "nodes": [...], "edges": [...]}`` around ``run_id``."""
    lineage = store.lineage(run_id)
    receipts = {r.child_run_id: r for r in [*lineage.ancestors, *lineage.descendants]}
    rows = views.ancestry(store, run_id) + views.descendants(store, run_id)
    edges: list[dict[str, Any]] = []
    seen: set[UUID] = set()
    for row in rows:
        child = row["child_run_id"]
        if child in seen:
            continue
        seen.add(child)
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
                else {name: row.get(name) for name in RECEIPT_COLUMNS}
            )
        edges.append(edge)
    ids = [run_id, *(e["parent"] for e in edges), *(e["child"] for e in edges)]
    found = views.run_rows(store, ids)
    nodes = [
        {
            "run_id": node,
            "current": node == run_id,
            **{name: (found.get(node) or {}).get(name) for name in NODE_COLUMNS},
        }
        for node in dict.fromkeys(ids)
    ]
    return plain({"run_id": run_id, "nodes": nodes, "edges": edges})
