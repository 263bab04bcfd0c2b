"""The operator's commands: every verb on SQLite and PostgreSQL, through ``actae``'s entry point.

They run in this process (``main([...])``), which is the entry point the installed command
calls; tests/integration/test_cli_errors.py runs the real process for the one-line errors.
The floor is set with the store's own commands, on a clock an hour behind, so the effect
claimed on it has a lease that ran out by the time the command looks on the real clock.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import actae
from actae.adapters.cli.main import main
from actae.adapters.persistence.clock import wall_clock


@dataclass(frozen=True)
class Floor:
    """A store with one run in each state an operator meets."""

    url: str
    waiting: actae.RunInfo
    failed: actae.RunInfo
    running: actae.RunInfo
    in_doubt: str  # effect key


@pytest.fixture
def floor(durable_url: str) -> Floor:
    an_hour_ago = actae.ManualClock(wall_clock() - timedelta(hours=1))
    with actae.open(durable_url, clock=an_hour_ago) as store:
        pins = {"model": "gpt-5.1-mini", "prompt": "p7"}
        waiting = store.start_run("order-1", agent_id="shipper", state={}, pins=pins)
        store.suspend(waiting.run_id, reason="approval", name="ship")
        failed = store.start_run("order-2", agent_id="shipper", state={})
        store.fail_run(failed.run_id, "card declined", actor="worker-1")
        running = store.start_run("refund-9", agent_id="refunder", state={})
        key = f"{running.run_id}:effect:charge:1"
        store.claim(key, run_id=running.run_id, worker="dead", lease=30.0, request={"n": 1})
    return Floor(durable_url, waiting, failed, running, key)


def actae_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def as_json(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    code, out, err = actae_cli(capsys, *args, "--json")
    assert code == 0, err
    return json.loads(out)


def test_runs_lists_filters_and_pages(floor: Floor, capsys: pytest.CaptureFixture[str]) -> None:
    db = ["--db", floor.url]

    code, table, _ = actae_cli(capsys, "runs", *db)
    waiting = as_json(capsys, "runs", *db, "--status", "waiting")
    refunds = as_json(capsys, "runs", *db, "--agent", "refunder")
    order_2 = as_json(capsys, "runs", *db, "--workflow", "order-2")
    first = as_json(capsys, "runs", *db, "--limit", "2")
    rest = as_json(capsys, "runs", *db, "--after", first["runs"][-1]["run_id"][:12])

    assert code == 0
    assert "waiting 1" in table
    assert "failed 1" in table
    assert "running 1" in table
    assert str(floor.waiting.run_id)[:8] in table
    assert "wait for approval ship" in table
    assert [r["run_id"] for r in waiting["runs"]] == [str(floor.waiting.run_id)]
    assert waiting["counts"]["waiting"] == 1
    assert [r["workflow_id"] for r in refunds["runs"]] == ["refund-9"]
    assert [r["status"] for r in order_2["runs"]] == ["failed"]
    paged = [r["run_id"] for r in first["runs"] + rest["runs"]]
    everyone = {str(r.run_id) for r in (floor.waiting, floor.failed, floor.running)}
    assert len(paged) == 3
    assert set(paged) == everyone


def test_show_prints_a_run_in_full_from_a_prefix(
    floor: Floor, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = str(floor.waiting.run_id)[:6]

    code, table, _ = actae_cli(capsys, "show", "--db", floor.url, prefix)
    shown = as_json(capsys, "show", "--db", floor.url, prefix)

    assert code == 0
    for expected in ("approval ship", "wait for approval ship", "model=gpt-5.1-mini", "order-1"):
        assert expected in table
    assert shown["run"]["run_id"] == str(floor.waiting.run_id)
    assert shown["status"] == "waiting"
    assert shown["run"]["state_version"] == 1


def test_effects_in_doubt_and_their_override(
    floor: Floor, capsys: pytest.CaptureFixture[str]
) -> None:
    db = ["--db", floor.url]

    code, table, _ = actae_cli(capsys, "effects", *db, "--in-doubt")
    before = as_json(capsys, "effects", *db, "--in-doubt")
    bad = actae_cli(
        capsys, "override", *db, floor.in_doubt, "completed", "--as", "ann", "--reason", "r",
        "--evidence", "{not json",
    )  # fmt: skip
    after_bad = as_json(capsys, "effects", *db, "--in-doubt")
    settled = as_json(
        capsys, "override", *db, floor.in_doubt[:45], "completed", "--as", "ann",
        "--reason", "the provider shows the charge", "--evidence", '{"charge": "ch_1"}',
        "--result", '{"charge": "ch_1"}',
    )  # fmt: skip
    after = as_json(capsys, "effects", *db, "--in-doubt")

    assert code == 0
    assert floor.in_doubt in table
    assert "yes" in table
    assert [e["effect_key"] for e in before] == [floor.in_doubt]
    assert bad[0] == 2
    assert bad[2].count("\n") == 1
    assert "invalid --evidence: not JSON" in bad[2]
    assert after_bad == before  # the refused override wrote nothing
    assert settled["status"] == "completed"
    assert after == []


def test_every_action_is_recorded_with_its_actor(
    floor: Floor, capsys: pytest.CaptureFixture[str]
) -> None:
    db = ["--db", floor.url]
    waiting, failed, running = (str(r.run_id) for r in (floor.waiting, floor.failed, floor.running))

    approved = as_json(
        capsys, "approve", *db, waiting[:10], "ship", "--as", "alice", "--note", "ok"
    )
    retried = as_json(capsys, "retry", *db, failed, "--as", "bob", "--reason", "card fixed")
    paused = as_json(capsys, "pause", *db, running, "--as", "carol", "--reason", "looking")
    unpaused = as_json(capsys, "unpause", *db, running, "--as", "carol", "--reason", "fine")
    cancelled = as_json(capsys, "cancel", *db, running, "--as", "dan", "--reason", "duplicate")
    code, said, _ = actae_cli(capsys, "pause", *db, waiting, "--as", "erin", "--reason", "hold")
    log = as_json(capsys, "audit", *db, running)
    code_table, table, _ = actae_cli(capsys, "audit", *db, waiting)

    assert approved["status"] == "running"
    assert retried["status"] == "running"
    assert (paused["status"], unpaused["status"], cancelled["status"]) == (
        "paused",
        "running",
        "cancelled",
    )
    assert code == 0
    assert "is now paused" in said
    assert [(a["action"], a["actor"], a["reason"]) for a in log] == [
        ("pause", "carol", "looking"),
        ("unpause", "carol", "fine"),
        ("cancel", "dan", "duplicate"),
    ]
    assert code_table == 0
    assert "alice" in table
    assert "erin" in table
    with actae.open(floor.url) as store:
        assert store.run(waiting).decisions["ship"].actor == "alice"


def test_deny_wakes_the_run_with_the_denial(
    floor: Floor, capsys: pytest.CaptureFixture[str]
) -> None:
    run_id = str(floor.waiting.run_id)

    denied = as_json(capsys, "deny", "--db", floor.url, run_id, "ship", "--as", "zoe")

    assert denied["status"] == "running"
    assert denied["decisions"]["ship"]["kind"] == "denied"
    assert denied["decisions"]["ship"]["actor"] == "zoe"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["show", "zz"], "invalid run_id: expected a run id or a prefix of one"),
        (["show", "0" * 31], "run 0000000000000000000000000000000 not found"),
        (["pause", "--as", "x", "--reason", "r", "0" * 31], "not found"),
        (["approve", "--as", "x", "0" * 32, "ship"], "not found"),
        (
            ["override", "nope", "completed", "--as", "x", "--reason", "r", "--evidence", "{}"],
            "effect nope not found",
        ),
        (["runs", "--status", "sleeping"], "Invalid value for '--status'"),
        (["pause", "0" * 32, "--reason", "r"], "Missing option '--as'"),
    ],
)
def test_operator_errors_are_one_line_and_status_2(
    floor: Floor, capsys: pytest.CaptureFixture[str], args: list[str], says: str
) -> None:
    code, _, err = actae_cli(capsys, *args, "--db", floor.url)

    assert code == 2, err
    assert err.count("\n") == 1, err
    assert says in err


def test_an_ambiguous_prefix_names_the_candidates(
    floor: Floor, capsys: pytest.CaptureFixture[str]
) -> None:
    with actae.open(floor.url) as store:
        firsts = {str(r.run_id)[0] for r in (floor.waiting, floor.failed, floor.running)}
        while True:  # 16 hex digits: two runs share a first digit within 17 runs
            run = store.start_run("more", agent_id="a", state={})
            if str(run.run_id)[0] in firsts:
                break
            firsts.add(str(run.run_id)[0])
    first = str(run.run_id)[0]

    code, _, err = actae_cli(capsys, "show", "--db", floor.url, first)

    assert code == 2
    assert err.count("\n") == 1
    assert f"'{first}' is ambiguous" in err
    assert str(run.run_id) in err


def test_run_data_is_printed_as_it_is_never_as_markup(
    floor: Floor, capsys: pytest.CaptureFixture[str]
) -> None:
    odd = "wf[/x] [bold]:rocket:"
    note = "per ticket [/billing] rules"
    with actae.open(floor.url) as store:
        run = store.start_run(odd, agent_id="a", state={})
        store.suspend(run.run_id, reason="approval", name="ship")
        store.approve(run.run_id, "ship", actor="[red]eve", note=note)
    run_id = str(run.run_id)

    listed = actae_cli(capsys, "runs", "--db", floor.url, "--workflow", odd)
    shown = actae_cli(capsys, "show", "--db", floor.url, run_id)
    audited = actae_cli(capsys, "audit", "--db", floor.url, run_id)

    assert (listed[0], shown[0], audited[0]) == (0, 0, 0), listed[2] + shown[2] + audited[2]
    assert odd in listed[1]
    assert odd in shown[1]
    assert note in shown[1]
    assert "[red]eve" in audited[1]
    assert note in audited[1]


def test_a_missing_console_extra_is_one_line_naming_what_to_install(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    real = importlib.util.find_spec

    def without_multipart(name: str, *args: Any) -> Any:
        return None if name == "python_multipart" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", without_multipart)
    auth = tmp_path / "users.json"

    code, _, err = actae_cli(
        capsys, "console", "add-user", "alice", "--role", "operator", "--auth-file", str(auth)
    )

    assert code == 2
    assert err == (
        "actae: error: invalid console: the console needs python-multipart, not installed "
        "here: pip install 'actae[console]'\n"
    )
    assert not auth.exists()
