"""The settings simulator in a browser: reached from Usage with its filters, a strategy's setting tried with two
values, the simulation waiting for a worker (and saying so), then a real ``manage.py db_worker`` started: the page
follows its progress by itself (htmx polling) to the results beside what happened, with the recommendation."""

from __future__ import annotations

import subprocess

import pytest

from sessions_app import services
from tests.browser.conftest import _db_worker, wait_until
from tests.conftest import CLAUDE_SAMPLES

pytestmark = pytest.mark.browser

# Two real sessions that compacted once each and a short one, of three projects.
SAMPLES = ["entirecli_a6e4c2a0fbd1-0_full.jsonl", "entirecli_4b7d5121b42a-0_full.jsonl", "spotter_short.jsonl"]


def test_simulate_settings_watch_the_progress_and_read_the_results(page, live_server):
    assert not services.import_paths(paths=[CLAUDE_SAMPLES / name for name in SAMPLES]).rejected
    page.goto(f"{live_server.url}/usage/?agent=claude-code")
    page.click("#simulator-link")
    page.wait_for_url("**/simulate/?**agent=claude-code**")
    # The agent filtered on picks its strategy, whose parameters are the form's fields.
    assert page.input_value("select[name=strategy]") == "claude-code"
    assert page.input_value("select[name=agent]") == "claude-code"
    # Another strategy brings its own parameters (the form reloads in place), the filters stay.
    page.select_option("select[name=strategy]", "klaude-code")
    page.wait_for_selector("#simulator-form input[name=reserve_tokens]")
    assert page.locator("#simulator-form input[name=pct_override]").count() == 0
    page.select_option("select[name=strategy]", "claude-code")
    page.wait_for_selector("#simulator-form input[name=pct_override]")
    assert page.input_value("select[name=agent]") == "claude-code"
    page.select_option("select[name=try_name]", "pct_override")
    page.fill("input[name=try_values]", "60, 90")
    page.click("#simulator-form button[type=submit]")
    page.wait_for_url("**/simulations/*/")

    # No worker yet: the simulation waits, says why, and polls.
    assert page.get_attribute("#simulation", "data-status") == "queued"
    assert "No worker is running" in page.inner_text("#simulation")
    url = page.url
    worker = _db_worker(stdout=subprocess.DEVNULL)
    next(worker)
    try:
        wait_until(page, "document.querySelector('#simulation').dataset.status === 'done'", timeout=90)
    finally:
        worker.close()
    assert page.url == url  # updated in place, not reloaded
    assert page.inner_text("#sessions-done") == page.inner_text("#sessions-total") == "3"

    # Per project: what happened, then each setting tried, and the recommendation (or why none).
    projects = page.locator("#simulation-projects tbody.project")
    assert projects.count() == 4  # all projects, then each of the three
    every = projects.first
    assert every.locator("tr.happened td").first.inner_text() == "what happened"
    settings = every.locator("tr.setting td:first-child").all_inner_texts()
    assert [s.replace("recommended", "").strip() for s in settings] == [
        "Auto-compact at 60 % of the window",
        "Auto-compact at 90 % of the window",
    ]
    advice = every.locator("tr.advice").inner_text()
    assert "Recommended: Auto-compact at " in advice or "keep what you have" in advice
    if "Recommended" in advice:
        assert every.locator("tr.setting.recommended .status").inner_text() == "recommended"
    # Per session: one row each, linking to the session, with what happened and both settings (4 numbers each).
    rows = page.locator("#simulation-sessions tbody tr")
    assert rows.count() == 3
    assert rows.first.locator("td").count() == 12
    rows.first.locator("a.quoted").click()
    page.wait_for_url("**/sessions/*/")
    assert page.errors == []
