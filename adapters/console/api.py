"""The JSON API under ``/api``: what the console's pages read, and what scripts can call.

Reads write nothing (the live projector keeps the read models current); an action catches
them up once it succeeded, so its answer shows its change. Its actor is the signed-in user.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse
from pydantic import AfterValidator, BaseModel, Field

from actae.adapters.console.guards import Operator, Viewer
from actae.adapters.console.state import console_of
from actae.adapters.console.stream import Stream, follow
from actae.adapters.console.wire import (
    change_document,
    effect_document,
    event_document,
    lineage_document,
    run_document,
    state_document,
)
from actae.adapters.operate import actions, views
from actae.adapters.operate.prefixes import resolve_effect, resolve_run
from actae.adapters.operate.versions import diff, state_version
from actae.adapters.runtime.store import Store
from actae.domain.errors import NotFoundError, ValidationError

log = logging.getLogger("actae.console")

router = APIRouter(prefix="/api")

EVENTS_PAGE = 500
CURSOR = re.compile(r"[0-9]{1,18}")
"""A cursor as ``Last-Event-ID`` carries it: ASCII digits only (``str.isdigit`` takes ``²``)."""


def _store(request: Request) -> Store:
    return console_of(request).store


Known = Annotated[Store, Depends(_store)]
Given = Annotated[str | None, AfterValidator(lambda text: text or None)]
"""A query parameter, with an empty one (``?status=``) taken as not given."""


def current_run(store: Store, run_id: UUID) -> dict[str, Any]:
    """The document of ``GET /api/runs/{run}``."""
    return run_document(views.run_view(store, run_id))


@router.get("/me", summary="The signed-in user")
def me(user: Viewer) -> dict[str, Any]:
    """Who the credentials belong to, and whether they may act."""
    return {"name": user.name, "role": user.role, "may_act": user.may_act}


@router.get("/runs", summary="Runs, newest first, with counts by status")
def list_runs(
    user: Viewer,
    store: Known,
    status: Given = None,
    workflow: Given = None,
    agent: Given = None,
    limit: int = views.PAGE,
    after: str | None = None,
) -> dict[str, Any]:
    """One page of runs; ``next`` is the ``after`` of the next page (``null``: the last one)."""
    last = None if not after else resolve_run(store, after)
    rows = views.runs(store, status=status, workflow=workflow, agent=agent, limit=limit, after=last)
    return {
        "runs": rows,
        "counts": views.status_counts(store),
        "next": str(rows[-1]["run_id"]) if rows and len(rows) == limit else None,
    }


@router.get("/approvals", summary="Runs waiting for an approval")
def list_approvals(user: Viewer, store: Known, limit: int = views.PAGE) -> dict[str, Any]:
    """The approvals inbox: runs waiting on an approval, the longest-waiting first."""
    return {"runs": views.approvals(store, limit=limit)}


@router.get("/runs/{run}", summary="One run in full")
def get_run(user: Viewer, store: Known, run: str) -> dict[str, Any]:
    """Status, waiting reason, next action, pins, head, decisions, usage and effects."""
    return current_run(store, resolve_run(store, run))


@router.get("/runs/{run}/events", summary="The run's channel events")
def run_events(
    user: Viewer, store: Known, run: str, after: int = 0, limit: int = EVENTS_PAGE
) -> dict[str, Any]:
    """Events after cursor ``after``, oldest first; ``next`` continues (``null``: the head)."""
    info = store.run(resolve_run(store, run))
    limit = views.limit_of(limit)
    events = store.events(info.channel_id, after=after, limit=limit)
    return {
        "run_id": str(info.run_id),
        "head_cursor": info.cursor,
        "events": [event_document(event) for event in events],
        "next": events[-1].cursor if len(events) == limit else None,
    }


@router.get("/runs/{run}/state", summary="The state in force at a cursor")
def run_state(user: Viewer, store: Known, run: str, cursor: int | None = None) -> dict[str, Any]:
    """The state version in force at ``cursor`` (default: the head), checksum verified."""
    info = store.run(resolve_run(store, run))
    return state_document(store.state_at(info.channel_id, cursor))


@router.get("/runs/{run}/diff", summary="What changed between two state versions")
def run_diff(
    user: Viewer,
    store: Known,
    run: str,
    before: Annotated[int | None, Query(alias="from")] = None,
    after: Annotated[int | None, Query(alias="to")] = None,
) -> dict[str, Any]:
    """Keys added, removed and changed; ``to`` defaults to the head, ``from`` to the one before."""
    info = store.run(resolve_run(store, run))
    to = state_version(store, info.channel_id, info.state_version if after is None else after)
    start = max(to.version - 1, 1) if before is None else before
    old = state_version(store, info.channel_id, start)
    return {
        "from": {"version": old.version, "cursor": old.cursor, "checksum": old.checksum},
        "to": {"version": to.version, "cursor": to.cursor, "checksum": to.checksum},
        "changes": [change_document(change) for change in diff(old.state, to.state)],
    }


@router.get("/runs/{run}/lineage", summary="Forks and children around the run")
def run_lineage(user: Viewer, store: Known, run: str) -> dict[str, Any]:
    """Nodes (runs) and edges (forks with their receipts, delegated children)."""
    return lineage_document(store, resolve_run(store, run))


@router.get("/runs/{run}/audit", summary="Operator actions on the run")
def run_audit(user: Viewer, store: Known, run: str) -> dict[str, Any]:
    """Who did what to the run and its effects, and why, oldest first."""
    return {"audit": views.audit(store, resolve_run(store, run))}


@router.get("/audit", summary="Recent operator actions")
def recent_audit(user: Viewer, store: Known, limit: int = views.PAGE) -> dict[str, Any]:
    """The latest operator actions on any run, newest first."""
    return {"audit": views.recent_audit(store, limit=limit)}


@router.get("/effects", summary="Ledger effects: in doubt, by status or by run")
def list_effects(
    user: Viewer,
    store: Known,
    in_doubt: bool = False,
    status: Given = None,
    run: str | None = None,
    limit: int = views.PAGE,
) -> dict[str, Any]:
    """Effects, most recently changed first: those in doubt, with a ledger status, or a run's."""
    if status is not None and (in_doubt or run):
        raise ValidationError("status", "give status alone, or in_doubt and run")
    run_id = None if not run else resolve_run(store, run)
    found = views.effects(store, in_doubt=in_doubt, run_id=run_id, status=status, limit=limit)
    return {"effects": found}


@router.get("/effects/{key:path}", summary="One effect with every attempt")
def get_effect(user: Viewer, store: Known, key: str) -> dict[str, Any]:
    """The ledger's word on the effect: status, fencing token, lease, attempts, result."""
    return effect_document(store.effect(resolve_effect(store, key)))


@router.get("/runs/{run}/stream", summary="The run live (server-sent events)")
async def run_stream(
    request: Request,
    user: Viewer,
    run: str,
    after: int = 0,
    last_event_id: Annotated[str | None, Header()] = None,
) -> StreamingResponse:
    """The run's events after cursor ``after`` (or ``Last-Event-ID``), then live, and its status."""
    console = console_of(request)
    store = console.store
    if last_event_id:
        if not CURSOR.fullmatch(last_event_id):
            raise ValidationError("Last-Event-ID", f"expected a cursor, got {last_event_id!r}")
        after = int(last_event_id)
    if after < 0:
        raise ValidationError("after", f"expected a cursor (0 or more), got {after}")
    run_id = await run_in_threadpool(resolve_run, store, run)
    info = await run_in_threadpool(store.run, run_id)
    if after > info.cursor:
        raise NotFoundError("cursor", after, f"run {run_id} is at cursor {info.cursor}")

    release = console.take_stream(user.name)  # when the response ends, however it ends
    return Stream(
        release,
        follow(console, info, after, lambda: current_run(store, run_id)),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


class Reason(BaseModel):
    """Why an operator cancels, pauses, unpauses or retries a run."""

    reason: str = Field(description="why; kept with the action in the audit log")


class Answer(BaseModel):
    """An approval or denial of the wait ``name``."""

    name: str = Field(description="the approval the run waits for (its waiting name)")
    note: str | None = Field(default=None, description="kept with the decision")


class Settlement(BaseModel):
    """What an effect in doubt (or needing review) did, as the provider says."""

    outcome: str = Field(description=f"one of {', '.join(actions.OUTCOMES)}")
    reason: str = Field(description="why you are sure")
    evidence: dict[str, Any] | None = Field(
        default=None, description="what the provider showed (a JSON object)"
    )
    result: Any = Field(
        default=None, description="completed: what the workflow's ctx.effect returns"
    )


def _answered(store: Known, run_id: UUID) -> dict[str, Any]:
    store.projector().catch_up()  # the live projector may lag
    return current_run(store, run_id)


def _decision_route(verb: str) -> Callable[..., dict[str, Any]]:
    def route(user: Operator, store: Known, run: str, body: Answer) -> dict[str, Any]:
        run_id = resolve_run(store, run)
        actions.DECISIONS[verb](store, run_id, body.name, actor=user.name, note=body.note)
        log.info("%s: %s %r of run %s", user.name, verb, body.name, run_id)
        return _answered(store, run_id)

    route.__doc__ = f"{verb.capitalize()} the run's approval ``name``, as the signed-in operator."
    return route


def _action_route(verb: str) -> Callable[..., dict[str, Any]]:
    def route(user: Operator, store: Known, run: str, body: Reason) -> dict[str, Any]:
        run_id = resolve_run(store, run)
        actions.RUN_ACTIONS[verb](store, run_id, actor=user.name, reason=body.reason)
        log.info("%s: %s run %s: %s", user.name, verb, run_id, body.reason)
        return _answered(store, run_id)

    route.__doc__ = f"{verb.capitalize()} the run, for ``reason``, as the signed-in operator."
    return route


for _verb, _route in [
    *((verb, _decision_route(verb)) for verb in actions.DECISIONS),
    *((verb, _action_route(verb)) for verb in actions.RUN_ACTIONS),
]:
    _route.__name__ = f"{_verb}_run"
    router.add_api_route(f"/runs/{{run}}/{_verb}", _route, methods=["POST"], summary=_verb)


@router.post("/effects/{key:path}/override", summary="Settle an effect in doubt")
def override_effect(user: Operator, store: Known, key: str, body: Settlement) -> dict[str, Any]:
    """Record what the effect did (``completed`` with its result, or ``failed``: tried again)."""
    effect_key = resolve_effect(store, key)
    info = store.override(
        effect_key,
        body.outcome,
        actor=user.name,
        reason=body.reason,
        evidence=body.evidence,
        result=body.result,
    )
    log.info("%s: override effect %s: %s (%s)", user.name, effect_key, body.outcome, body.reason)
    store.projector().catch_up()  # the next list of effects in doubt no longer shows it
    return effect_document(info)
