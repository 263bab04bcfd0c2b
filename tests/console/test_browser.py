"""The console in a real browser: Chromium from the system, a real ``actae console`` process.

An operator signs in, filters the runs to the waiting ones, approves a refund and watches it
move: to running at once, then, as a worker (in this test's process) takes it on, to
completed, with the new events in its timeline, without reloading. Then a workflow driven
step by step by the test shows up on its run page as each step commits. The run page is
screenshot into the test's temporary folder; with ``ACTAE_SCREENSHOT=docs/console.png`` (a
path from the repository's root) it is also saved there, which is how the README's
screenshot is made: ``ACTAE_SCREENSHOT=docs/console.png .venv/bin/pytest
tests/console/test_browser.py``. A plain run leaves the source tree alone.

Chromium is Debian's (the Playwright download is not reachable here): the test skips where
there is none, and fails when ``CI=true``.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

import actae
from actae.adapters.console.auth import add_user
from tests.console.scenario import Scenario
from tests.console.serving import DEADLINE, ConsoleProcess

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOT = "ACTAE_SCREENSHOT"
"""The variable naming where, from the repository's root, to save the screenshot too."""


def screenshot(page: Page, tmp_path: Path) -> Path:
    """The page as a PNG in ``tmp_path``, copied to ``$ACTAE_SCREENSHOT`` when that is set."""
    taken = tmp_path / "console.png"
    page.screenshot(path=str(taken))
    wanted = os.environ.get(SCREENSHOT)
    if wanted:
        keep = ROOT / wanted
        keep.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(taken, keep)
    return taken


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    """Chromium from the system, headless."""
    path = shutil.which("chromium")
    if path is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("the browser test needs Chromium when CI=true (apt-get install chromium)")
        pytest.skip("no chromium on PATH")
    expect.set_options(timeout=DEADLINE * 1000)  # Playwright's 5 s is short on a loaded machine
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=path, args=["--no-sandbox", "--disable-gpu"]
        )
        yield browser
        browser.close()


def sign_in(page: Page, base: str, token: str) -> None:
    page.goto(f"{base}/")
    expect(page).to_have_url(re.compile(r"/login\?next=/$"))
    page.get_by_label("Access token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Runs")).to_be_visible()


class Morning:
    """A store with a morning's runs (on a test clock two hours behind), and its clock."""

    def __init__(self, url: str) -> None:
        self.clock = actae.ManualClock(datetime.now(UTC) - timedelta(hours=2))
        self.store = actae.open(url, clock=self.clock)
        self.scenario = Scenario(self.store, self.clock)
        self.made = self.scenario.populate()

    def now(self) -> None:
        """Bring the test's clock to the wall clock the console writes on."""
        self.clock.advance(max(0.0, (datetime.now(UTC) - self.clock()).total_seconds()))


def approve_a_waiting_run(page: Page, morning: Morning) -> None:
    """Filter to the waiting runs, open a refund, approve it; a worker finishes it."""
    filters = page.get_by_role("navigation", name="Filter by status")
    waiting = filters.get_by_role("link", name=re.compile(r"^Waiting"))
    expect(waiting).to_have_text("Waiting3")
    waiting.click()
    expect(page).to_have_url(re.compile(r"\?status=waiting$"))
    expect(page.locator("tbody .status")).to_have_text(["waiting"] * 3)

    refund = morning.made["waiting"]
    page.locator(f'tr[data-run="{refund.run_id}"] td:nth-child(2) a').click()
    expect(page.get_by_role("heading", name=refund.workflow_id)).to_be_visible()
    expect(page.locator("#run-status")).to_have_text("waiting")
    expect(page.locator(".live")).to_have_text("live")

    page.get_by_role("group", name="Actions").get_by_role("button", name="Approve").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_label("Note (kept with the decision)").fill("within the refund policy")
    dialog.get_by_role("button", name="Approve").click()
    expect(page.locator("#run-status")).to_have_text("running")
    assert morning.store.run(refund.run_id).decisions["finance-lead"].actor == "alice"

    morning.now()
    morning.scenario.work()  # a worker takes it on: the page follows without reloading
    expect(page.locator("#run-status")).to_have_text("completed")
    expect(page.locator("#timeline tbody tr").last).to_contain_text("run.completed")
    expect(page.locator("#timeline")).to_contain_text("effect.completed")
    page.get_by_role("button", name="State at cursor 3").click()
    state = page.get_by_role("region", name="State", exact=True)
    expect(state).to_contain_text('"stage": "assessed"')


def follow_a_workflow_step_by_step(page: Page, morning: Morning, base: str) -> None:
    """Each step the test commits shows up in the open run page's timeline."""
    store, followed = morning.store, morning.made["running"]
    page.goto(f"{base}/runs/{followed.run_id}")
    expect(page.locator(".live")).to_have_text("live")
    head = store.head(followed.channel_id)
    for step in (1, 2, 3):
        morning.now()
        head = store.transition(
            followed.channel_id,
            kind="triage.step",
            payload={"step": step},
            state={"ticket": "T-311", "step": step},
            expected_version=head.state_version,
            expected_cursor=head.cursor,
        )
        row = page.locator(f'#timeline tr[data-cursor="{head.cursor}"]')
        expect(row).to_contain_text("triage.step")
        expect(row).to_contain_text(f"v{head.state_version}")
    store.complete_run(followed.run_id, {"routed_to": "billing"})
    expect(page.locator("#run-status")).to_have_text("completed")


def test_an_operator_approves_a_run_and_follows_runs_live(
    durable_url: str, tmp_path: Path, chromium: Browser
) -> None:
    url = durable_url  # SQLite and PostgreSQL: the page follows a run by polling or NOTIFY
    morning = Morning(url)
    auth_file = tmp_path / "users.json"
    token = add_user(auth_file, "alice", "operator")
    problems: list[str] = []
    readme_shot = ROOT / "docs" / "console.png"
    before = readme_shot.stat().st_mtime_ns if readme_shot.exists() else None

    with ConsoleProcess(url, auth_file) as console, morning.store:
        page = chromium.new_page(viewport={"width": 1280, "height": 800})
        page.on("pageerror", lambda error: problems.append(str(error)))
        sign_in(page, console.base, token)

        approve_a_waiting_run(page, morning)
        page.evaluate("window.scrollTo(0, 0)")
        expect(page.locator("#timeline .fresh")).to_have_count(0)  # new rows' highlight faded
        assert screenshot(page, tmp_path).stat().st_size > 0

        follow_a_workflow_step_by_step(page, morning, console.base)

    assert problems == []
    if not os.environ.get(SCREENSHOT):  # a plain run leaves the source tree alone
        assert (readme_shot.stat().st_mtime_ns if readme_shot.exists() else None) == before
