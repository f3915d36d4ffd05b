"""A session growing on disk while its page and its timeline are open: both update without a reload."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from sessions_app import models, services
from tests.browser.conftest import wait_until
from tests.helpers.live_session import RunningWatcher, assistant_line, compact_lines, rising_calls, user_line

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
        # The Agents panel beside it follows too (it kept its first numbers while the overview moved on).
        page.locator("#agents >> text=2 calls, peak 2,400").wait_for()

        page.goto(f"{live_server.url}/sessions/{session.pk}/timeline/")
        wait_until(page, "() => document.getElementById('chart')?.uplot !== undefined")
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


def _added_announcements(page) -> int:
    return page.evaluate("() => window.announced")


def _tile(page, name: str) -> str:
    """An overview tile's number (the overview is swapped whole: find it again each time)."""
    return page.evaluate(
        "(name) => [...document.querySelectorAll('#overview .tile')]"
        ".find((t) => t.querySelector('dt').textContent === name).querySelector('dd').textContent.trim()",
        name,
    )


def _wait_for_tile(page, name: str, value: str) -> None:
    deadline = time.monotonic() + 10
    while _tile(page, name) != value:
        assert time.monotonic() < deadline, f"{name} stayed {_tile(page, name)}, not {value}"
        page.wait_for_timeout(100)


def test_an_open_session_page_stays_whole_and_announces_a_compaction_once(page, live_server, settings, tmp_path: Path):
    settings.LIVE_POLL_SECONDS = 1
    folder = tmp_path / "projects" / "-home-me-proj"
    folder.mkdir(parents=True)
    path = folder / "live-1.jsonl"
    path.write_text(rising_calls([10_000, 20_000]))
    watching = RunningWatcher(tmp_path / "projects")
    watching.thread.start()
    try:
        watching.wait_for(lambda: models.Message.objects.filter(session__external_id="live-1").count() == 4)
        session = models.Session.objects.get(external_id="live-1")
        page.goto(f"{live_server.url}/sessions/{session.pk}/")
        page.locator("#live-status .live-badge").wait_for()
        timeline = page.context.new_page()
        timeline.errors = []
        timeline.on("pageerror", lambda exc: timeline.errors.append(str(exc)))
        timeline.goto(f"{live_server.url}/sessions/{session.pk}/timeline/")
        wait_until(timeline, "() => document.getElementById('chart')?.uplot !== undefined")
        wait_until(timeline, "() => document.querySelector('#live-status .live-badge') !== null")
        # Each live band swapped in that announces an event (role=alert), counted as the page receives it.
        for p in (page, timeline):
            p.evaluate(
                """() => {
                window.notReloaded = true; window.announced = 0;
                new MutationObserver((records) => records.forEach((r) => r.addedNodes.forEach((n) => {
                  if (n.id === 'live-status' && n.querySelector('.live-event-new[role=alert]')) window.announced++;
                }))).observe(document.body, { childList: true, subtree: true });
            }"""
            )
        assert (_tile(page, "API calls"), _tile(page, "Compactions")) == ("2", "0")

        with path.open("a") as f:
            f.write(rising_calls([40_000, 60_000], start=3, parent="a2"))
        _wait_for_tile(page, "API calls", "4")
        assert "60,000" in page.locator("#overview .gauge-legend").inner_text()

        with path.open("a") as f:
            f.write(compact_lines(parent="a4", pre_tokens=61_000) + rising_calls([9_000], start=5, parent="sum1"))
        announcement = page.locator("#live-status .live-event-new[role=alert]")
        announcement.wait_for()
        # The watcher may import the boundary a pass before the call after it: that call's context then follows.
        assert announcement.inner_text().startswith("Compacted after call 4 (preview): 61,000")
        _wait_for_tile(page, "Compactions", "1")
        assert _tile(page, "API calls") == "5"
        assert page.locator("#overview .computing").count() == 1  # the worker has not analysed this version yet

        # The timeline: the chart's markers, its caption and its event list, without a reload.
        markers = "document.getElementById('chart').timeline.events"
        wait_until(timeline, f"() => {markers}.some((m) => m.kind === 'compaction' && m.pre_tokens === 61000)")
        wait_until(timeline, "() => document.querySelector('#timeline-events .marker-compaction') !== null")
        assert "5 API calls on the main chain" in timeline.locator("#timeline-caption").inner_text()
        assert "61,000 tokens before" in timeline.locator("#timeline-events").inner_text()

        # Further polls show the event but never announce it again.
        page.wait_for_timeout(3_500)
        assert page.locator("#live-status .live-event-new").count() == 0
        assert "Compacted after call 4 (preview): 61,000 → 9,000 tokens" in page.locator("#live-status").inner_text()
        assert _added_announcements(page) == 1 and _added_announcements(timeline) == 1

        # The worker's analysis lands: the overview, still "computing", fetches itself and shows it.
        services.estimate_session_tokens(session_id=session.pk)
        services.analyse_session(session_id=session.pk)
        page.locator("#overview .treemap").wait_for()
        assert page.locator("#overview .computing").count() == 0
        assert page.evaluate("() => window.notReloaded === true")
        assert timeline.evaluate("() => window.notReloaded === true")
        assert page.errors == [] and timeline.errors == []  # type: ignore[attr-defined]
    finally:
        watching.stop.set()
        watching.thread.join(timeout=10)
