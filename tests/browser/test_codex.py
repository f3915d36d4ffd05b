"""A Codex session in the browser: transcript items, the timeline's compaction marker, a preview."""

from __future__ import annotations

import re

import pytest

from sessions_app import services
from tests.browser.conftest import wait_until
from tests.conftest import CODEX_SAMPLES

pytestmark = pytest.mark.browser


def test_codex_transcript_timeline_and_preview(page, live_server):
    moonmind = next(CODEX_SAMPLES.glob("moonmind__*.jsonl"))
    shown = services.import_file(path=moonmind)
    page.goto(f"{live_server.url}/sessions/{shown.session}/")
    text = page.inner_text("body")
    # A call is one folded line without its id; opened, its output is under it.
    assert "call_WACyKudKwgUwJOn8m7WINdq2" not in text
    call = page.locator("details.tool-use").first
    assert "shell" in call.locator(":scope > summary").inner_text()
    call.locator(":scope > summary").click()
    assert "/mnt/d/ai/MoonMind" in call.locator(".tool-result").first.inner_text()
    assert page.locator(".encrypted").count() > 0
    assert re.fullmatch(r"encrypted reasoning \([\d,]+ bytes\)", page.inner_text(".encrypted >> nth=0"))
    # apply_patch as a diff: added lines are marked.
    page.goto(f"{live_server.url}/sessions/{shown.session}/?q=Begin+Patch")
    assert page.locator("pre.diff .add").count() > 0

    compacted = next(CODEX_SAMPLES.glob("localpush__*remote-compaction*.jsonl"))
    outcome = services.import_file(path=compacted)
    page.goto(f"{live_server.url}/sessions/{outcome.session}/")
    # It opens on its system prompt, folded to one line with its size: not a screen of instructions.
    first = page.locator("#transcript li.msg").first
    assert "system prompt ·" in first.inner_text() and first.bounding_box()["height"] < 200
    page.click("text=Token timeline")
    page.wait_for_url("**/timeline/")
    wait_until(page, "() => document.getElementById('chart')?.uplot !== undefined")
    marker = page.locator("tr.marker-compaction").inner_text()
    # The drop the compaction caused: the last call before it and the first after it (SOURCES.md).
    assert "remote" in marker and "last recorded 209,950" in marker and "next call 48,297" in marker
    page.goto(f"{live_server.url}/sessions/{outcome.session}/preview/?strategy=codex&at=183")
    body = page.inner_text("body")
    assert "Codex" in body and "244,800" in body
    assert page.errors == []
