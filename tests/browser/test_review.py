"""Preview a cut, run it against the scripted API, watch it finish, compare, accept, find it in the reviews.

The run is executed by a real ``manage.py db_worker`` subprocess sharing the live server's test database.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connections

from sessions_app import models
from tests.anthropic_server import ScriptedServer, slow
from tests.sessions_app.test_runs import anthropic_api, cc_session, imported  # noqa: F401

pytestmark = pytest.mark.browser
REPO = Path(__file__).resolve().parents[2]
SUMMARY = (
    "<summary>1. Primary Request: fix the division by zero in app.py, then add tests.\n"
    + "".join(f"{n}. Detail {n}: the fix and its tests are described here.\n" for n in range(2, 10))
    + "</summary>"
)


def _database_url() -> str:
    db = connections["default"].settings_dict
    if connections["default"].vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    user = db.get("USER") or "postgres"
    return f"postgres://{user}@{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"


@pytest.fixture
def worker(transactional_db, anthropic_api: ScriptedServer, settings) -> Iterator[subprocess.Popen[bytes]]:  # noqa: F811
    """A real `manage.py db_worker`, as `bin/run` starts it, on the live server's database."""
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(),
        "ANTHROPIC_API_KEY": settings.ANTHROPIC_API_KEY,
        "ANTHROPIC_BASE_URL": settings.ANTHROPIC_BASE_URL,
        "SUMMARY_MODEL": settings.SUMMARY_MODEL,
        "DEBUG": "0",
        "SECRET_KEY": "browser-test-worker",
    }
    process = subprocess.Popen(
        [sys.executable, "manage.py", "db_worker", "--no-reload", "--no-startup-delay", "--interval", "0.2"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    yield process
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()


def test_preview_run_compare_accept(page, live_server, tmp_path, anthropic_api, worker):  # noqa: F811
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
