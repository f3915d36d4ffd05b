"""A session growing on disk while its page and its timeline are open: both update without a reload."""

from __future__ import annotations

from pathlib import Path

import pytest

from sessions_app import models
from tests.browser.conftest import wait_until
from tests.sessions_app.test_watcher import RunningWatcher, assistant_line, user_line

pytestmark = pytest.mark.browser


def test_open_pages_follow_a_growing_session(page, live_server, settings, tmp_path: Path):
    settings.LIVE_POLL_SECONDS = 1
    folder = tmp_path / "projects" / "-home-me-proj"
    folder.mkdir(parents=True)
    path = folder / "live-1.jsonl"
    path.write_text(user_line("u1", None, "first question") + assistant_line("a1", "u1", "m1", "first", ctx=1200))
    watching = RunningWatcher(tmp_path / "projects")
    watching.thread.start()
    try:
        watching.wait_for(lambda: models.Message.objects.filter(session__external_id="live-1").count() == 2)
        session = models.Session.objects.get(external_id="live-1")

        page.goto(f"{live_server.url}/sessions/{session.pk}/")
        page.locator("#live-status .live-badge").wait_for()
        page.evaluate("() => { window.notReloaded = true; }")
        with path.open("a") as f:
            f.write(user_line("u2", "a1", "second question") + assistant_line("a2", "u2", "m2", "GREW-1", ctx=2400))
        page.locator("#transcript >> text=GREW-1").wait_for()
        assert page.evaluate("() => window.notReloaded === true")

        page.goto(f"{live_server.url}/sessions/{session.pk}/timeline/")
        wait_until(page, "() => document.getElementById('chart').uplot !== undefined")
        page.evaluate("() => { window.notReloaded = true; }")
        assert page.evaluate("() => document.getElementById('chart').uplot.data[1].filter(v => v != null).length") == 2
        with path.open("a") as f:
            f.write(user_line("u3", "a2", "third question") + assistant_line("a3", "u3", "m3", "GREW-2", ctx=3600))
        wait_until(page, "() => document.getElementById('chart').uplot.data[1].filter(v => v != null).length === 3")
        assert page.evaluate("() => window.notReloaded === true")
        assert "3,600" in page.locator("#live-status").inner_text()
        assert page.errors == []  # type: ignore[attr-defined]
    finally:
        watching.stop.set()
        watching.thread.join(timeout=10)
