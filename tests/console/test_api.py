"""The console's JSON API on SQLite and PostgreSQL: every route, its errors and its guards.

Runs are made by real workflows run by an ``actae.Worker`` (tests/console/scenario.py). The
guards are tested by what they refuse: no credentials (401), a viewer acting (403), a
browser's change without its CSRF token (403), and an action whose body names another actor
(recorded as the signed-in user all the same).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
import pytest

from actae.adapters.operate import views
from actae.adapters.operate.versions import diff
from tests.console.harness import (
    DEADLINE,
    OPERATOR,
    VIEWER,
    Console,
    held_projector,
    stream,
    take,
)

DOCS = Path(__file__).resolve().parents[2] / "docs" / "console.md"


def ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


def refused(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == code, error
    assert error["message"]
    return error


# -- who may ask ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer not-a-token"}, {"Authorization": "Basic YWxpY2U6eA=="}],
    ids=["none", "unknown token", "not bearer"],
)
def test_a_request_without_valid_credentials_is_refused_with_401(
    console: Console, headers: dict[str, str]
) -> None:
    for path in ("/api/runs", "/api/effects?in_doubt=true", "/metrics"):
        response = console.client.get(path, headers=headers)
        refused(response, 401, "unauthorized")
        assert response.headers["www-authenticate"].startswith("Bearer")
    run = console.made["waiting"]
    response = console.client.post(
        f"/api/runs/{run.run_id}/cancel", json={"reason": "x"}, headers=headers
    )
    refused(response, 401, "unauthorized")
    assert console.store.run(run.run_id).status.value == "waiting"


def test_me_says_who_the_token_belongs_to(console: Console) -> None:
    assert ok(console.client.get("/api/me", headers=console.bearer(VIEWER))) == {
        "name": VIEWER,
        "role": "viewer",
        "may_act": False,
    }


def test_a_viewer_reads_but_cannot_act(console: Console) -> None:
    run = console.scenario.waiting()
    viewer = console.bearer(VIEWER)
    assert ok(console.client.get(f"/api/runs/{run.run_id}", headers=viewer))["status"] == "waiting"

    for verb, body in [
        ("approve", {"name": "finance-lead"}),
        ("deny", {"name": "finance-lead"}),
        ("cancel", {"reason": "r"}),
        ("pause", {"reason": "r"}),
    ]:
        response = console.client.post(f"/api/runs/{run.run_id}/{verb}", json=body, headers=viewer)
        refused(response, 403, "forbidden")
    _, key = console.scenario.in_doubt()
    response = console.client.post(
        f"/api/effects/{key}/override",
        json={"outcome": "failed", "reason": "r"},
        headers=viewer,
    )
    refused(response, 403, "forbidden")

    assert console.store.run(run.run_id).status.value == "waiting"
    assert console.store.effect(key).in_doubt


# -- browsers: sign-in, the session cookie and CSRF ----------------------------------------------


@pytest.fixture
def browser(console: Console) -> Iterator[str]:
    """The shared client signed in as the operator through /login; yields the CSRF token."""
    client = console.client
    response = client.post(
        "/login", data={"token": console.tokens[OPERATOR], "next": "/"}, follow_redirects=False
    )
    assert response.status_code == 303
    assert response.headers["location"] == "/"
    cookie = response.headers["set-cookie"]
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie
    assert "Path=/" in cookie
    page = client.get("/")
    assert page.status_code == 200
    assert page.headers["cache-control"] == "no-store"
    match = re.search(r'<meta name="csrf-token" content="([^"]+)">', page.text)
    assert match is not None
    yield match.group(1)
    client.cookies.clear()


def test_a_browser_change_needs_its_csrf_token(console: Console, browser: str) -> None:
    run = console.scenario.running()
    path = f"/api/runs/{run.run_id}/pause"
    assert ok(console.client.get("/api/me"))["name"] == OPERATOR  # the cookie signs reads in

    refused(console.client.post(path, json={"reason": "hold"}), 403, "csrf")
    refused(
        console.client.post(path, json={"reason": "hold"}, headers={"X-CSRF-Token": "forged"}),
        403,
        "csrf",
    )
    assert console.store.run(run.run_id).status.value == "running"

    paused = ok(
        console.client.post(path, json={"reason": "hold"}, headers={"X-CSRF-Token": browser})
    )
    assert paused["status"] == "paused"


def test_signing_out_ends_the_session(console: Console, browser: str) -> None:
    refused(console.client.post("/logout", data={"csrf_token": "forged"}), 403, "csrf")
    response = console.client.post("/logout", data={"csrf_token": browser}, follow_redirects=False)
    assert response.status_code == 303
    assert response.headers["location"] == "/login"
    refused(console.client.get("/api/me"), 401, "unauthorized")


def test_a_sign_in_from_another_site_is_refused(console: Console) -> None:
    token = console.tokens[VIEWER]
    for headers in (
        {"Origin": "http://evil.example"},
        {"Origin": "https://127.0.0.1"},  # another scheme: another origin
        {"Origin": "null"},  # a sandboxed frame, say, with no browser word that it is ours
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site", "Origin": "http://127.0.0.1"},
    ):
        response = console.client.post(
            "/login", data={"token": token}, headers=headers, follow_redirects=False
        )
        refused(response, 403, "cross_origin")
        assert "set-cookie" not in response.headers, headers
        assert "default-src 'self'" in response.headers["content-security-policy"]

    for headers in (
        {"Origin": "http://127.0.0.1", "Sec-Fetch-Site": "same-origin"},
        {"Origin": "http://127.0.0.1:80"},
        {"Origin": "null", "Sec-Fetch-Site": "same-origin"},  # a browser's own, vouched for
        {},  # no browser: nothing to forge
    ):
        response = console.client.post(
            "/login", data={"token": token}, headers=headers, follow_redirects=False
        )
        assert response.status_code == 303, (headers, response.text)
        console.client.cookies.clear()


def test_a_cookie_change_from_another_site_is_refused_even_with_its_csrf_token(
    console: Console, browser: str
) -> None:
    run = console.scenario.running()
    path = f"/api/runs/{run.run_id}/pause"
    for headers in ({"Origin": "http://evil.example"}, {"Sec-Fetch-Site": "cross-site"}):
        response = console.client.post(
            path, json={"reason": "hold"}, headers={"X-CSRF-Token": browser, **headers}
        )
        refused(response, 403, "cross_origin")
        refused(
            console.client.post("/logout", data={"csrf_token": browser}, headers=headers),
            403,
            "cross_origin",
        )
    assert console.store.run(run.run_id).status.value == "running"
    assert ok(console.client.get("/api/me"))["name"] == OPERATOR  # still signed in

    same = {"X-CSRF-Token": browser, "Origin": "http://127.0.0.1", "Sec-Fetch-Site": "same-origin"}
    assert ok(console.client.post(path, json={"reason": "hold"}, headers=same))["status"] == (
        "paused"
    )


def test_a_wrong_token_does_not_sign_in(console: Console) -> None:
    response = console.client.post("/login", data={"token": "guess"}, follow_redirects=False)
    assert response.status_code == 401
    assert "matches no user" in response.text
    assert "set-cookie" not in response.headers


def test_pages_send_a_browser_without_a_session_to_sign_in(console: Console) -> None:
    response = console.client.get("/approvals?x=1", follow_redirects=False)
    assert response.status_code == 303
    assert response.headers["location"] == "/login?next=/approvals%3Fx%3D1"
    form = console.client.get("/login?next=//evil.example/")
    assert 'name="next" value="/"' in form.text  # no redirect to another site
    csp = form.headers["content-security-policy"]
    assert "default-src 'self'" in csp
    assert "frame-ancestors 'none'" in csp
    assert form.headers["x-content-type-options"] == "nosniff"


def test_static_assets_are_served_from_the_package(console: Console) -> None:
    for name, kind in [
        ("console.js", "javascript"),
        ("console.css", "text/css"),
        ("favicon.svg", "svg"),
    ]:
        response = console.client.get(f"/static/{name}")
        assert response.status_code == 200
        assert kind in response.headers["content-type"]
    assert "http" not in console.client.get("/static/console.css").text  # nothing remote


# -- the actor is the signed-in user -------------------------------------------------------------


def test_the_actor_is_the_signed_in_user_whatever_the_body_says(console: Console) -> None:
    run = console.scenario.waiting()
    body = {"name": "finance-lead", "note": "within budget", "actor": "mallory"}

    approved = ok(
        console.client.post(f"/api/runs/{run.run_id}/approve", json=body, headers=console.bearer())
    )

    assert approved["status"] == "running"
    decision = approved["decisions"]["finance-lead"]
    assert (decision["actor"], decision["note"]) == (OPERATOR, "within budget")
    assert console.store.run(run.run_id).decisions["finance-lead"].actor == OPERATOR
    audit = ok(console.client.get(f"/api/runs/{run.run_id}/audit", headers=console.bearer()))
    assert [(row["action"], row["actor"]) for row in audit["audit"]] == [("approve", OPERATOR)]
    assert "mallory" not in str(audit)

    paused = console.scenario.running()
    ok(
        console.client.post(
            f"/api/runs/{paused.run_id}/pause",
            json={"reason": "customer asked", "actor": "mallory"},
            headers=console.bearer(),
        )
    )
    (note,) = [e for e in console.store.events(paused.channel_id) if e.kind == "run.paused"]
    assert note.contents()["actor"] == OPERATOR


def test_an_override_is_recorded_as_the_signed_in_user(console: Console) -> None:
    run, key = console.scenario.in_doubt()
    listed = ok(console.client.get("/api/effects?in_doubt=true", headers=console.bearer()))
    assert key in [effect["effect_key"] for effect in listed["effects"]]

    settled = ok(
        console.client.post(
            f"/api/effects/{key[:20]}/override",  # a unique prefix names the effect
            json={
                "outcome": "completed",
                "reason": "the bank shows transfer tr_9",
                "evidence": {"statement": "tr_9"},
                "result": {"transfer_id": "tr_9"},
                "actor": "mallory",
            },
            headers=console.bearer(),
        )
    )

    assert (settled["effect_key"], settled["status"]) == (key, "completed")
    assert settled["value"] == {"transfer_id": "tr_9"}  # what the workflow's ctx.effect gets
    listed = ok(console.client.get("/api/effects?in_doubt=true", headers=console.bearer()))
    assert key not in [effect["effect_key"] for effect in listed["effects"]]
    audit = ok(console.client.get(f"/api/runs/{run.run_id}/audit", headers=console.bearer()))
    assert [(row["action"], row["actor"]) for row in audit["audit"]] == [("override", OPERATOR)]
    assert audit["audit"][0]["effect_key"] == key


# -- reads --------------------------------------------------------------------------------------


def test_runs_are_listed_by_status_with_counts_and_pages(console: Console) -> None:
    everything = ok(
        console.client.get("/api/runs?status=&workflow=&limit=200", headers=console.bearer())
    )
    counts = everything["counts"]
    assert sum(counts.values()) == len(everything["runs"])
    assert everything["next"] is None
    for status in ("running", "waiting", "retrying", "blocked"):
        listed = ok(
            console.client.get(f"/api/runs?status={status}&limit=200", headers=console.bearer())
        )
        assert {run["status"] for run in listed["runs"]} <= {status}
        assert len(listed["runs"]) == counts[status] >= 1

    first = ok(console.client.get("/api/runs?limit=2", headers=console.bearer()))
    second = ok(
        console.client.get(f"/api/runs?limit=2&after={first['next']}", headers=console.bearer())
    )
    ids = [run["run_id"] for run in everything["runs"]]
    assert [run["run_id"] for run in first["runs"] + second["runs"]] == ids[:4]

    research = console.made["forked"][0]
    mine = ok(
        console.client.get(f"/api/runs?workflow={research.workflow_id}", headers=console.bearer())
    )
    assert {run["workflow_id"] for run in mine["runs"]} == {research.workflow_id}
    assert len(mine["runs"]) == 2  # the run and its fork


def test_approvals_lists_the_runs_waiting_on_one(console: Console) -> None:
    inbox = ok(console.client.get("/api/approvals", headers=console.bearer()))
    assert inbox["runs"]
    assert {(r["status"], r["waiting_reason"]) for r in inbox["runs"]} == {("waiting", "approval")}
    assert str(console.made["waiting"].run_id) in [r["run_id"] for r in inbox["runs"]]


def test_a_run_is_shown_in_full_by_a_prefix_of_its_id(console: Console) -> None:
    run = console.made["blocked"][0]
    shown = ok(console.client.get(f"/api/runs/{str(run.run_id)[:8]}", headers=console.bearer()))
    assert shown["run_id"] == str(run.run_id)
    assert (shown["status"], shown["lifecycle"]) == ("blocked", "running")
    assert shown["next_action"].startswith("review effect")
    assert shown["pins"]["model"] == "gpt-4.1"
    (effect,) = shown["effects"]
    assert (effect["status"], effect["attempts"]) == ("needs_review", 2)
    assert shown["read_model"]["workflow_id"] == run.workflow_id


def test_the_timeline_state_and_diff_of_a_run(console: Console) -> None:
    run, _ = console.made["forked"]
    base = f"/api/runs/{run.run_id}"
    events = ok(console.client.get(f"{base}/events", headers=console.bearer()))
    kinds = [event["kind"] for event in events["events"]]
    assert kinds[0] == "run.started"
    assert kinds[-1] == "run.completed"
    assert [e["cursor"] for e in events["events"]] == list(range(1, events["head_cursor"] + 1))
    made = [e for e in events["events"] if e["kind"] == "transition"]
    assert [(e["state_version"], e["state_cursor"] == e["cursor"]) for e in made] == [
        (2, True),
        (3, True),
    ]
    page = ok(console.client.get(f"{base}/events?after=2&limit=2", headers=console.bearer()))
    assert [e["cursor"] for e in page["events"]] == [3, 4]
    assert page["next"] == 4

    first = made[0]["cursor"]
    state = ok(console.client.get(f"{base}/state?cursor={first}", headers=console.bearer()))
    assert state["version"] == 2
    assert state["state"]["words"] == 0
    head = ok(console.client.get(f"{base}/state", headers=console.bearer()))
    assert head["state"]["done"] is True

    changed = ok(console.client.get(f"{base}/diff?from=2&to=3", headers=console.bearer()))
    assert (changed["from"]["version"], changed["to"]["version"]) == (2, 3)
    assert changed["changes"] == [
        {"path": ["done"], "kind": "added", "after": True},
        {"path": ["words"], "kind": "changed", "before": 0, "after": 1240},
    ]
    assert ok(console.client.get(f"{base}/diff", headers=console.bearer()))["from"]["version"] == 2
    started = ok(console.client.get(f"{base}/diff?from=1&to=2", headers=console.bearer()))
    assert {c["kind"] for c in started["changes"]} == {"added", "removed"}


def test_a_diff_tells_json_types_apart() -> None:
    assert diff({"n": [1, {"k": True}]}, {"n": [1, {"k": 1}]}) != []  # true is not 1
    assert diff({"n": 1}, {"n": 1.0}) != []
    assert diff({"n": [{"a": 1, "b": 2}]}, {"n": [{"b": 2, "a": 1}]}) == []


def test_lineage_shows_forks_with_their_receipts_and_children(console: Console) -> None:
    run, fork = console.made["forked"]
    graph = ok(
        console.client.get(f"/api/runs/{fork.child_run_id}/lineage", headers=console.bearer())
    )
    (edge,) = graph["edges"]
    assert (edge["parent"], edge["child"], edge["relation"]) == (
        str(run.run_id),
        str(fork.child_run_id),
        "fork",
    )
    receipt = edge["receipt"]
    assert (receipt["requested_boundary"], receipt["resolved_boundary"]) == (3, 3)
    assert receipt["state_version"] == 2
    assert receipt["state_checksum"].startswith("sha256:")
    assert receipt["reason"] == "retry the draft with a cheaper model"
    assert {n["run_id"]: n["current"] for n in graph["nodes"]} == {
        str(run.run_id): False,
        str(fork.child_run_id): True,
    }

    planner = console.made["delegating"]
    graph = ok(console.client.get(f"/api/runs/{planner.run_id}/lineage", headers=console.bearer()))
    (edge,) = graph["edges"]
    assert (edge["parent"], edge["relation"]) == (str(planner.run_id), "child")
    assert {n["status"] for n in graph["nodes"]} == {"waiting", "running"}


def test_effects_by_doubt_status_and_run_with_their_attempts(console: Console) -> None:
    run, key = console.made["blocked"]
    review = ok(console.client.get("/api/effects?status=needs_review", headers=console.bearer()))
    assert key in [e["effect_key"] for e in review["effects"]]
    mine = ok(console.client.get(f"/api/effects?run={run.run_id}", headers=console.bearer()))
    assert [e["effect_key"] for e in mine["effects"]] == [key]

    effect = ok(console.client.get(f"/api/effects/{key}", headers=console.bearer()))
    assert effect["status"] == "needs_review"
    assert effect["token"] == 2
    assert [(a["attempt"], a["token"], a["worker"]) for a in effect["attempts"]] == [
        (1, 1, "worker-2"),
        (2, 2, "worker-1"),
    ]


def test_recent_audit(console: Console) -> None:
    listed = ok(console.client.get("/api/audit", headers=console.bearer()))
    assert ("pause", "dana") in [(r["action"], r["actor"]) for r in listed["audit"]]


# -- reads only read; an action shows its change at once ------------------------------------------


def test_a_viewers_reads_write_nothing(console: Console, monkeypatch: pytest.MonkeyPatch) -> None:
    store = console.store
    projector = store.projector()
    blocked, key = console.made["blocked"]
    research, _ = console.made["forked"]
    with held_projector(console, monkeypatch):
        unseen = console.scenario.running()  # stored; the read models do not have it yet
        behind, stored = projector.position(), store.position()
        assert behind < stored
        opened: list[str] = []
        transaction = projector.db.transaction

        def counted() -> AbstractContextManager[None]:
            opened.append(threading.current_thread().name)
            return transaction()

        monkeypatch.setattr(projector.db, "transaction", counted)
        viewer = console.bearer(VIEWER)
        base = f"/api/runs/{research.run_id}"
        for path in (
            "/api/me",
            "/api/runs",
            "/api/runs?status=waiting",
            "/api/approvals",
            f"/api/runs/{blocked.run_id}",
            f"{base}/events",
            f"{base}/state",
            f"{base}/diff",
            f"{base}/lineage",
            f"{base}/audit",
            "/api/audit",
            "/api/effects?in_doubt=true",
            "/api/effects?status=needs_review",
            f"/api/effects?run={blocked.run_id}",
            f"/api/effects/{key}",
            f"/api/effects/{key[:20]}",
            "/metrics",
        ):
            assert console.client.get(path, headers=viewer).status_code == 200, path
        shown = ok(console.client.get(f"/api/runs/{unseen.run_id}", headers=viewer))
        assert (shown["status"], shown["read_model"]) == ("running", None)  # the store's word
        with stream(console, f"/api/runs/{unseen.run_id}/stream") as arrived:
            _, status, _ = take(arrived, "status")
            assert status["run_id"] == str(unseen.run_id)

        assert opened == []  # no transaction on the read models (on SQLite: BEGIN IMMEDIATE)
        assert (projector.position(), store.position()) == (behind, stored)


def test_an_action_shows_its_change_at_once(
    console: Console, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = console.scenario.running()
    console.store.projector().catch_up()  # its run_status row says running
    headers = console.bearer()
    with held_projector(console, monkeypatch):
        paused = ok(
            console.client.post(
                f"/api/runs/{run.run_id}/pause", json={"reason": "hold"}, headers=headers
            )
        )
        assert (paused["status"], paused["read_model"]["status"]) == ("paused", "paused")
        listed = ok(console.client.get("/api/runs?status=paused&limit=1000", headers=headers))
        assert str(run.run_id) in [row["run_id"] for row in listed["runs"]]

        _, key = console.scenario.in_doubt()  # (caught up by the test itself)
        settle = {"outcome": "failed", "reason": "never arrived"}
        ok(console.client.post(f"/api/effects/{key}/override", json=settle, headers=headers))
        doubtful = ok(console.client.get("/api/effects?in_doubt=true&limit=1000", headers=headers))
        assert key not in [effect["effect_key"] for effect in doubtful["effects"]]


def test_a_full_effect_key_or_run_id_names_it_before_the_read_models_have_it(
    console: Console, monkeypatch: pytest.MonkeyPatch
) -> None:
    headers = console.bearer()
    with held_projector(console, monkeypatch):
        run = console.scenario.start("payout", "payouts", amount=99)
        key = console.scenario.doubt(run, "transfer")

        assert ok(console.client.get(f"/api/runs/{run.run_id}", headers=headers))["run_id"] == (
            str(run.run_id)
        )
        shown = ok(console.client.get(f"/api/effects/{key}", headers=headers))
        assert (shown["effect_key"], shown["in_doubt"]) == (key, True)
        # a prefix is searched in the read models, which do not have it yet (docs/console.md)
        refused(console.client.get(f"/api/effects/{key[:-2]}", headers=headers), 404, "not_found")
        settle = {"outcome": "failed", "reason": "the bank has no such transfer"}
        settled = ok(
            console.client.post(f"/api/effects/{key}/override", json=settle, headers=headers)
        )
        assert (settled["effect_key"], settled["in_doubt"]) == (key, False)


def test_recent_audit_orders_actions_of_one_moment_the_same_way_every_time(
    console: Console,
) -> None:
    runs = [console.scenario.running() for _ in range(6)]
    for run in runs:  # all at one moment of the test's clock
        console.store.pause(run.run_id, actor="dana", reason="one moment")
    assert views.caught_up(console.store, DEADLINE)

    listed = ok(console.client.get("/api/audit?limit=1000", headers=console.bearer()))["audit"]
    mine = [row for row in listed if row["run_id"] in {str(run.run_id) for run in runs}]
    assert len(mine) == len(runs)
    assert len({row["at"] for row in mine}) == 1
    in_order = sorted(listed, key=lambda row: (UUID(row["aggregate_id"]), row["version"]))
    in_order.sort(key=lambda row: row["at"], reverse=True)  # stable: ties keep the order above
    assert listed == in_order


# -- failures -------------------------------------------------------------------------------------


def test_an_unexpected_failure_is_a_500_and_an_outage_a_503_in_the_json_shape(
    console: Console, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug with a secret in it")

    def unreachable(*args: Any, **kwargs: Any) -> Any:
        raise psycopg.OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(views, "totals", broken)
    monkeypatch.setattr(views, "runs", unreachable)
    viewer = console.bearer(VIEWER)

    failed = console.client.get("/metrics", headers=viewer)
    error = refused(failed, 500, "internal")
    assert "secret" not in error["message"]
    down = console.client.get("/api/runs", headers=viewer)
    refused(down, 503, "unavailable")
    for response in (
        failed,
        down,
        console.client.get("/api/runs"),  # 401
        console.client.get("/api/nothing", headers=viewer),  # 404
        console.client.get("/api/runs/not-hex", headers=viewer),  # 422
    ):
        assert response.headers["content-type"] == "application/json"
        assert "default-src 'self'" in response.headers["content-security-policy"]
        assert response.headers["x-frame-options"] == "DENY"


# -- actions ------------------------------------------------------------------------------------


def test_lifecycle_actions_move_the_run(console: Console) -> None:
    run = console.scenario.running()
    base = f"/api/runs/{run.run_id}"
    headers = console.bearer()
    assert (
        ok(console.client.post(f"{base}/pause", json={"reason": "hold"}, headers=headers))["status"]
        == "paused"
    )
    assert (
        ok(console.client.post(f"{base}/unpause", json={"reason": "go"}, headers=headers))["status"]
        == "running"
    )
    assert (
        ok(console.client.post(f"{base}/cancel", json={"reason": "dup"}, headers=headers))["status"]
        == "cancelled"
    )

    failed = console.scenario.failed()
    retried = ok(
        console.client.post(
            f"/api/runs/{failed.run_id}/retry", json={"reason": "column added"}, headers=headers
        )
    )
    assert retried["status"] == "running"
    assert retried["retries"] == 1

    denied = console.scenario.waiting()
    answer = ok(
        console.client.post(
            f"/api/runs/{denied.run_id}/deny", json={"name": "finance-lead"}, headers=headers
        )
    )
    assert answer["decisions"]["finance-lead"]["kind"] == "denied"


def test_an_action_the_run_is_not_in_a_state_for_is_a_409(console: Console) -> None:
    run = console.scenario.waiting()
    headers = console.bearer()
    error = refused(
        console.client.post(
            f"/api/runs/{run.run_id}/unpause", json={"reason": "r"}, headers=headers
        ),
        409,
        "illegal_transition",
    )
    assert (error["status"], error["action"]) == ("waiting", "unpause")
    error = refused(
        console.client.post(
            f"/api/runs/{run.run_id}/approve", json={"name": "manger"}, headers=headers
        ),
        409,
        "not_waiting",
    )
    assert error["waiting"] == ["approval 'finance-lead'"]
    research = console.made["forked"][0]
    refused(
        console.client.post(
            f"/api/runs/{research.run_id}/cancel", json={"reason": "r"}, headers=headers
        ),
        409,
        "illegal_transition",
    )
    _, key = console.scenario.in_doubt()
    settle = {"outcome": "failed", "reason": "never arrived"}
    ok(console.client.post(f"/api/effects/{key}/override", json=settle, headers=headers))
    refused(
        console.client.post(f"/api/effects/{key}/override", json=settle, headers=headers),
        409,
        "effect_blocked",
    )


def test_bad_input_is_a_422_naming_the_field(console: Console) -> None:
    run = console.made["waiting"]
    headers = console.bearer()
    cases = [
        (console.client.post(f"/api/runs/{run.run_id}/cancel", json={}, headers=headers), "reason"),
        (
            console.client.post(
                f"/api/runs/{run.run_id}/cancel", json={"reason": ""}, headers=headers
            ),
            "reason",
        ),
        (console.client.get("/api/runs?status=sleeping", headers=headers), "status"),
        (console.client.get("/api/runs?limit=0", headers=headers), "limit"),
        (console.client.get("/api/runs?limit=many", headers=headers), "limit"),
        (console.client.get("/api/runs/not-hex", headers=headers), "run_id"),
        (console.client.get("/api/effects?status=lost", headers=headers), "status"),
    ]
    _, key = console.made["in_doubt"]
    for body, field in [
        ({"outcome": "maybe", "reason": "r"}, "outcome"),
        ({"outcome": "completed", "reason": "r", "evidence": "a text"}, "evidence"),
    ]:
        cases.append(
            (console.client.post(f"/api/effects/{key}/override", json=body, headers=headers), field)
        )
    for response, field in cases:
        error = refused(response, 422, "validation")
        assert error["field"] == field, error
        assert error["reason"]
    assert console.store.run(run.run_id).status.value == "waiting"
    assert console.store.effect(key).in_doubt


def test_what_does_not_exist_is_a_404(console: Console) -> None:
    headers = console.bearer()
    missing = "0" * 32
    refused(console.client.get(f"/api/runs/{missing}", headers=headers), 404, "not_found")
    refused(console.client.get("/api/runs/00000", headers=headers), 404, "not_found")
    refused(console.client.get("/api/effects/no-such-key", headers=headers), 404, "not_found")
    run = console.made["waiting"]
    base = f"/api/runs/{run.run_id}"
    refused(console.client.get(f"{base}/state?cursor=999", headers=headers), 404, "not_found")
    refused(console.client.get(f"{base}/events?after=999", headers=headers), 404, "not_found")
    refused(console.client.get(f"{base}/diff?to=99", headers=headers), 404, "not_found")
    refused(console.client.get(f"{base}/stream?after=999", headers=headers), 404, "not_found")
    refused(console.client.get("/api/nothing", headers=headers), 404, "not_found")
    refused(
        console.client.post(f"/api/runs/{missing}/cancel", json={"reason": "r"}, headers=headers),
        404,
        "not_found",
    )


# -- metrics and the API's description ----------------------------------------------------------


def test_metrics_in_prometheus_text_format(console: Console) -> None:
    response = console.client.get("/metrics", headers=console.bearer(VIEWER))
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    counts = ok(console.client.get("/api/runs", headers=console.bearer()))["counts"]
    assert f'actae_runs{{status="waiting"}} {float(counts["waiting"])}' in text
    for name in (
        "actae_effects_in_doubt ",
        "actae_effect_attempts_total ",
        "actae_effect_retries_total ",
        "actae_projection_lag ",
        "actae_console_streams ",
    ):
        assert name in text, name
    assert re.search(r"^actae_effects_in_doubt [1-9]", text, re.MULTILINE)


def test_the_metrics_are_the_ones_the_docs_list(console: Console) -> None:
    text = console.client.get("/metrics", headers=console.bearer(VIEWER)).text
    served = {
        re.split(r"[{ ]", line, maxsplit=1)[0] for line in text.splitlines() if line[:1] != "#"
    } - {""}
    section = DOCS.read_text().split("## Metrics", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `(actae_\w+)", section, re.MULTILINE))
    assert served == listed
    # OpenTelemetry's actae.steps (actae_steps_total) counts replayed steps too: not ours
    assert "actae_steps_total" not in served


def test_the_openapi_document_describes_every_route(console: Console) -> None:
    document = ok(console.client.get("/api/openapi.json"))
    paths = document["paths"]
    for path in (
        "/api/runs",
        "/api/runs/{run}",
        "/api/runs/{run}/events",
        "/api/runs/{run}/state",
        "/api/runs/{run}/diff",
        "/api/runs/{run}/lineage",
        "/api/runs/{run}/audit",
        "/api/runs/{run}/stream",
        "/api/effects",
        "/api/runs/{run}/approve",
        "/api/runs/{run}/deny",
        "/api/runs/{run}/cancel",
        "/api/runs/{run}/pause",
        "/api/runs/{run}/unpause",
        "/api/runs/{run}/retry",
        "/api/effects/{key}/override",
    ):
        assert path in paths, path
    assert "actor" not in str(paths["/api/runs/{run}/approve"])
    assert console.client.get("/docs").status_code == 404  # Swagger UI would need a CDN


@pytest.mark.parametrize("back_to", ["//evil.example/", "/\\evil.example", "/\t/evil.example", "x"])
def test_signing_in_never_leads_to_another_site(console: Console, back_to: str) -> None:
    response = console.client.post(
        "/login",
        data={"token": console.tokens[VIEWER], "next": back_to},
        follow_redirects=False,
    )
    assert response.headers["location"] == "/"
    console.client.cookies.clear()
