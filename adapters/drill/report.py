"""The drill's report: every figure computed from the store's channels and the provider's ledger.

The driver keeps no counters. Charges are counted from the provider's executions, so a
second execution under one key is a duplicate and an idempotent replay is not.
"""

from __future__ import annotations

import itertools
import json
import statistics
import urllib.request
from collections import Counter
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from actae.adapters.drill.outages import outage_figures
from actae.adapters.drill.provider import LLM_COST, RETRY_AFTER
from actae.domain.effects import STEP_RESULT
from actae.domain.values import ChannelEvent, RunInfo

if TYPE_CHECKING:
    from actae.adapters.runtime.store import Store

MANUAL = {"run.approved", "run.denied", "run.paused", "run.unpaused", "run.cancelled"}


class Sources(Protocol):
    """What a report reads of a drill (``run.Drill``): its store, journal and provider."""

    store: Store
    log: RunInfo  # the drill's own run: kills, deliveries and clock jumps
    provider_url: str  # serves its own ledger at /ledger


class Report:
    """The drill's figures, computed from the store and the provider's own ledger."""

    def __init__(self, drill: Sources, workflow: str, coordinator: Any) -> None:
        self.store, self.workflow = drill.store, workflow
        self.coordinator = self.store.run(coordinator)
        children = self.store.lineage(coordinator).children
        self.runs = [self.coordinator, *(self.store.run(c) for c in children)]
        self.events = {r.run_id: self.store.events(r.channel_id) for r in self.runs}
        self.journal = self.store.events(drill.log.channel_id)
        self.log = [e for e in self.journal if e.contents().get("workflow") == workflow]
        with urllib.request.urlopen(f"{drill.provider_url}/ledger", timeout=10) as reply:  # noqa: S310
            self.ledger = json.loads(reply.read())
        self.run_ids = {str(r.run_id) for r in self.runs}
        self.everything = self._everything()

    def figures(self) -> dict[str, Any]:
        """Every figure of the report, and ``ok``: whether every invariant held."""
        killed = next(e for e in self.log if e.kind == "drill.killed")
        model_calls, charges = self._requests("llm"), self._requests("charge")
        rerun = self._regenerated(model_calls)
        repeated = len(model_calls) - len({r["key"] for r in model_calls}) - rerun
        throttled, honoured = self._throttles(charges)
        seen, absorbed = self._duplicate_deliveries()
        before_kill = [r for r in model_calls if _clock(r) <= killed.recorded_at]
        figures = {
            "workflow": self.workflow,
            "status": self.coordinator.status.value,
            "killed_after_transition": killed.contents()["after_transitions"],
            "recovery_seconds": self._recovery(killed.recorded_at),
            "manual_steps": self._manual_steps(),
            "workers_exited_unplanned": sum(e.kind == "drill.worker_exited" for e in self.log),
            "duplicate_deliveries_seen": seen,
            "duplicate_deliveries_absorbed": absorbed,
            "duplicate_charges": self._duplicate_charges(),
            "idempotent_replays": sum(r["outcome"] == "replayed" for r in charges),
            "lost_or_reordered_events": self._lost_or_reordered(),
            "model_calls": len(model_calls),
            "model_calls_rerun": rerun,
            "model_calls_repeated_in_flight": repeated,
            "http_429_received": throttled,
            "http_429_honoured": honoured,
            "schema_migrated_to": self.coordinator.pins["schema"],
            "total_cost": round(len(model_calls) * LLM_COST, 2),
            "cost_saved_by_not_rerunning": round(len(before_kill) * LLM_COST, 2),
        }
        if outages := outage_figures(self.journal, self._recovery, self.workflow):
            figures["db_outages"] = outages
            figures["db_outage_count"] = len(outages)
            figures["db_outage_max_seconds"] = max(o["outage_seconds"] for o in outages)
            figures["db_recovery_max_seconds"] = max(o["recovery_seconds"] for o in outages)
        figures["ok"] = all(
            (
                figures["status"] == "completed",
                figures["manual_steps"] == 0,
                figures["workers_exited_unplanned"] == 0,
                figures["duplicate_charges"] == 0,
                figures["lost_or_reordered_events"] == 0,
                figures["model_calls_rerun"] == 0,
                honoured == throttled,
                absorbed == seen,
            )
        )
        return figures

    def _requests(self, kind: str) -> list[dict[str, Any]]:
        return [
            r
            for r in self.ledger["requests"]
            if r["kind"] == kind and r["key"].split(":", 1)[0] in self.run_ids
        ]

    def _regenerated(self, calls: list[dict[str, Any]]) -> int:
        """Model calls made for a step whose result was already recorded (must be 0)."""
        recorded = {
            f"{run_id}:llm:{e.contents()['name']}": e.recorded_at
            for run_id, events in self.events.items()
            for e in events
            if e.kind == STEP_RESULT
        }
        return sum(
            1 for call in calls if call["key"] in recorded and _clock(call) > recorded[call["key"]]
        )

    def _recovery(self, killed_at: datetime) -> float:
        # Kill (or database back) -> next committed step, less skipped virtual time: a jump
        # over a dead worker's lease counts (production waits too), one over a timer does not.
        after = [
            e.recorded_at
            for events in self.events.values()
            for e in events
            if e.recorded_at > killed_at
        ]
        if not after:  # the killed worker had already finished everything
            return 0.0
        resumed = min(after)
        # A jump counts only if it took effect before the step: a step stamped while the
        # drill was deciding to jump (after reading the time it jumps from) did not wait.
        skipped: float = sum(
            float(e.contents()["seconds"])
            for e in self.journal
            if e.kind == "drill.clock_advanced"
            and e.contents()["reason"] != "lease"
            and killed_at <= datetime.fromisoformat(e.contents()["from"])
            and datetime.fromisoformat(e.contents()["from"])
            + timedelta(seconds=float(e.contents()["seconds"]))
            <= resumed
        )
        return round((resumed - killed_at).total_seconds() - skipped, 3)

    def _manual_steps(self) -> int:
        worker_prefix = f"{self.workflow}-w"
        return sum(
            1
            for events in self.events.values()
            for e in events
            if e.kind in MANUAL
            or (
                e.kind == "effect.reconciled"
                and not str(e.contents().get("actor")).startswith(worker_prefix)
            )
        )

    def _duplicate_charges(self) -> int:
        """Charges executed beyond the first per invoice (a key twice, or an invoice twice)."""
        invoices = Counter(
            c["invoice"]
            for c in self.ledger["charges"]
            if str(c["invoice"]).startswith(f"{self.workflow}:")
        )
        return sum(n - 1 for n in invoices.values())

    def _duplicate_deliveries(self) -> tuple[int, int]:
        """Deliveries beyond the first (journalled), and how many of them started no run."""
        delivered = sum(e.kind == "queue.delivered" for e in self.log)
        started = sum(
            e.kind == "run.started"
            and e.contents().get("workflow_id") == self.workflow
            and e.contents().get("agent_id") == "drill-coordinator"
            for e in self.everything
        )
        seen = max(delivered - 1, 0)
        return seen, max(seen - max(started - 1, 0), 0)

    def _everything(self) -> list[ChannelEvent]:
        # Every channel event, in commit order, to the position now: paged, as a subscription
        # would wait forever when that position is not a channel event's.
        target = self.store.position()
        found: list[ChannelEvent] = []
        position = 0
        while page := self.store.events(None, after=position, limit=1000):
            found.extend(e for e in page if (e.position or 0) <= target)
            position = page[-1].position or target
            if position >= target:
                break
        return found

    def _lost_or_reordered(self) -> int:
        problems = 0
        for events in self.events.values():
            cursors = [e.cursor for e in events]
            problems += cursors != list(range(1, len(cursors) + 1))
        wanted = sum(len(events) for events in self.events.values())
        seen: dict[Any, list[int]] = {}
        for event in self.everything:
            if event.run_id in self.events:
                seen.setdefault(event.run_id, []).append(event.cursor)
        problems += sum(cursors != sorted(cursors) for cursors in seen.values())
        problems += abs(wanted - sum(len(c) for c in seen.values()))
        return problems

    @staticmethod
    def _throttles(charges: list[dict[str, Any]]) -> tuple[int, int]:
        throttled = honoured = 0
        by_key: dict[str, list[dict[str, Any]]] = {}
        for request in charges:
            by_key.setdefault(request["key"], []).append(request)
        for requests in by_key.values():
            for first, then in itertools.pairwise(requests):
                if first["status"] == 429:
                    throttled += 1
                    honoured += (_clock(then) - _clock(first)).total_seconds() >= RETRY_AFTER
        return throttled, honoured


def _clock(request: dict[str, Any]) -> datetime:
    """When the provider was asked ``request``, on the store's clock (the worker's header)."""
    return datetime.fromisoformat(request["clock"])


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Recovery percentiles and totals over all runs."""
    recoveries = sorted(r["recovery_seconds"] for r in results)
    outages = [o for r in results for o in r.get("db_outages", [])]
    database: dict[str, Any] = {}
    if outages:
        database["db_outages"] = len(outages)
        database["db_recovery_max_seconds"] = max(o["recovery_seconds"] for o in outages)
    return {
        **database,
        "runs": len(results),
        "recovery_p50_seconds": statistics.median(recoveries),
        "recovery_p95_seconds": recoveries[min(len(recoveries) - 1, int(len(recoveries) * 0.95))],
        "recovered_within_60s": sum(r <= 60 for r in recoveries) / len(recoveries),
        "all_ok": all(r["ok"] for r in results),
    }


ROWS = (
    ("status", "workflow status"),
    ("killed_after_transition", "coordinator killed after transition"),
    ("recovery_seconds", "recovery time, kill -> next committed step (s, store clock)"),
    ("manual_steps", "manual steps"),
    ("workers_exited_unplanned", "worker processes that exited unplanned"),
    ("duplicate_deliveries_seen", "duplicate queue deliveries seen"),
    ("duplicate_deliveries_absorbed", "duplicate queue deliveries absorbed"),
    ("duplicate_charges", "duplicate charges at the provider"),
    ("idempotent_replays", "idempotent replays answered by the provider"),
    ("lost_or_reordered_events", "lost or reordered events"),
    ("model_calls", "model calls made"),
    ("model_calls_rerun", "model calls re-run (completed, recorded steps)"),
    ("model_calls_repeated_in_flight", "model calls repeated (in flight at the kill)"),
    ("http_429_received", "HTTP 429 received"),
    ("http_429_honoured", "HTTP 429 Retry-After honoured"),
    ("schema_migrated_to", "state schema after the rollout"),
    ("total_cost", "total model cost ($)"),
    ("cost_saved_by_not_rerunning", "cost saved by not re-running ($)"),
)
DATABASE_ROWS = (  # when the drill took the database down: then every run has an outage
    ("db_outage_count", "database outages (--db-fault)"),
    ("db_outage_max_seconds", "longest outage, fault -> accepting again (s)"),
    ("db_recovery_max_seconds", "recovery, database back -> next committed step (s)"),
)
MAXED = frozenset({"recovery_seconds", "db_outage_max_seconds", "db_recovery_max_seconds"})


def table(results: list[dict[str, Any]], summary: dict[str, Any]) -> str:
    """The report as an aligned text table: one column per run, or totals for many runs."""
    rows = ROWS + DATABASE_ROWS if "db_outage_count" in results[0] else ROWS
    width = max(len(label) for _, label in rows)
    columns, names = results, [f"run {i + 1}" for i in range(len(results))]
    if len(results) > 3:
        columns, names = [_totals(results, rows)], [f"{len(results)} runs"]
    lines = ["", f"{'figure':<{width}}  " + "  ".join(f"{name:<10}" for name in names)]
    lines.append("-" * len(lines[-1]))
    for key, label in rows:
        lines.append(f"{label:<{width}}  " + "  ".join(f"{c[key]!s:<10}" for c in columns))
    lines.append(
        f"\nrecovery p50 {summary['recovery_p50_seconds']} s, p95 "
        f"{summary['recovery_p95_seconds']} s, recovered within 60 s: "
        f"{summary['recovered_within_60s']:.0%}"
    )
    lines.append("ALL INVARIANTS HELD" if summary["all_ok"] else "INVARIANTS FAILED")
    return "\n".join(lines)


TALLIED = frozenset({"status", "killed_after_transition", "schema_migrated_to"})  # not summed


def _totals(
    results: list[dict[str, Any]], rows: tuple[tuple[str, str], ...] = ROWS
) -> dict[str, Any]:
    """Counts summed, statuses tallied, recovery and outages as their worst case."""
    totals: dict[str, Any] = {}
    for key, _ in rows:
        values = [r[key] for r in results]
        if key in MAXED:
            totals[key] = f"max {max(values)}"
        elif key in TALLIED or not all(isinstance(v, int | float) for v in values):
            totals[key] = ", ".join(f"{v} x{n}" for v, n in Counter(map(str, values)).items())
        else:
            totals[key] = round(sum(values), 2)
    return totals
