"""Open a diagnosis, follow a contributor link to the transcript, toggle a replay overlay on the timeline."""

from __future__ import annotations

import pytest

from sessions_app import services
from tests.browser.conftest import wait_until
from tests.conftest import CLAUDE_SAMPLES

pytestmark = pytest.mark.browser


def test_diagnosis_contributor_link_and_replay_overlay(page, live_server):
    outcome = services.import_file(path=CLAUDE_SAMPLES / "entirecli_f9f6f611b469-0_full.jsonl")
    page.goto(f"{live_server.url}/sessions/{outcome.session}/")
    page.click("p.actions a.button:has-text('Diagnosis')")
    verdict = page.inner_text(".verdict")
    assert "176,700" in verdict
    link = page.locator("a.contributor").first
    seq = link.inner_text().lstrip("#")
    link.click()
    page.wait_for_selector(f"#m{seq}")
    assert page.url.endswith(f"#m{seq}")
    assert page.locator(f"#m{seq}").is_visible()

    page.goto(f"{live_server.url}/sessions/{outcome.session}/timeline/")
    wait_until(page, "() => document.getElementById('chart')?.uplot !== undefined")
    before = page.evaluate("() => document.getElementById('chart').uplot.series.length")
    page.click("text=What-if replay")
    page.check("input[name=replay][value=klaude-code]")
    page.click("button:has-text('Replay')")
    page.wait_for_selector("tr.replay-row[data-strategy=klaude-code]")
    wait_until(page, "() => document.getElementById('chart')?.uplot !== undefined")
    labels = page.evaluate("() => document.getElementById('chart').uplot.series.map(s => s.label)")
    assert "replay: klaude-code" in labels and len(labels) == before + 1
    assert "replay=klaude-code" in page.url  # the URL holds the page state
    page.uncheck("input[name=replay][value=klaude-code]")
    page.click("button:has-text('Replay')")
    wait_until(page, "() => document.querySelector('tr.replay-row') === null")
    assert page.errors == []
