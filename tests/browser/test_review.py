"""Preview a cut, run it against the scripted API, watch it finish, compare, accept, find it in the reviews.

The run is executed by a real ``manage.py db_worker`` subprocess sharing the live server's test database.
"""

from __future__ import annotations

import pytest

from sessions_app import models
from tests.anthropic_server import slow
from tests.browser.conftest import SUMMARY
from tests.helpers.claude_code_lines import cc_session
from tests.helpers.runs import imported

pytestmark = pytest.mark.browser


def test_preview_run_compare_accept(page, live_server, tmp_path, anthropic_api, worker):
    session = imported(cc_session(tmp_path))
    # Slow enough to see the progress arrive while the page polls.
    anthropic_api.script(slow(SUMMARY, chunk_delay=0.2))  # about 4 s of streaming

    page.goto(f"{live_server.url}/sessions/{session.pk}/")
    page.click("text=Preview compaction")
    page.wait_for_selector("#preview")
    assert "(the strategy's)" in page.inner_text("#cut")

    page.fill("input[name=cut_start]", "1")
    page.fill("input[name=cut_end]", "3")
    page.click("#preview button:has-text('Preview')")
    page.wait_for_selector("#cut:has-text('by hand')")
    assert "cut_start=1" in page.url and "cut_end=3" in page.url  # the URL can be shared
    transcript = page.inner_text("pre.transcript")
    assert "Fixed the division by zero" in transcript and "please fix the bug" not in transcript

    page.click("#run-compaction")
    page.wait_for_url(f"{live_server.url}/runs/*/")
    run = models.CompactionRun.objects.get()
    page.evaluate("window.__sameDocument = true")
    page.wait_for_selector("#run-status[data-status=running] pre.progress", timeout=20_000)
    page.wait_for_selector("#run-status[data-status=succeeded]", timeout=20_000)
    assert page.evaluate("window.__sameDocument") is True  # finished without a reload
    assert "1. Primary Request: fix the division by zero" in page.inner_text("#summary")
    assert page.get_attribute("#run-status", "hx-trigger") is None  # polling stopped

    page.click("#compare-link")
    page.wait_for_selector(".side-by-side")
    assert "Fixed the division by zero in app.py." in page.inner_text("#left")
    assert "Primary Request" in page.inner_text("#right")

    page.go_back()
    page.fill("textarea[name=comment]", "Keeps the fix and the next step.")
    page.click("button[value=accepted]")
    page.wait_for_selector(".review-accepted")
    assert "accepted" in page.inner_text("#review") and "browser" in page.inner_text("#review")

    page.click("header.top >> text=Reviews")
    page.wait_for_selector("#decided")
    decided = page.inner_text("#decided")
    assert f"run {run.pk}" in decided and "Keeps the fix and the next step." in decided
    assert "No runs." in page.inner_text("#pending")
    assert page.errors == []  # type: ignore[attr-defined]
