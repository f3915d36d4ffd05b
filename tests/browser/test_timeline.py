"""Open a session with a compaction, see the marker, click a point, see that call's detail and composition."""

from __future__ import annotations

import pytest

from sessions_app import services
from tests.browser.conftest import wait_until
from tests.conftest import CLAUDE_SAMPLES

pytestmark = pytest.mark.browser


def test_timeline_marker_click_and_composition(page, live_server):
    outcome = services.import_file(path=CLAUDE_SAMPLES / "entirecli_a6e4c2a0fbd1-0_full.jsonl")
    services.estimate_session_tokens(session_id=outcome.session)
    page.goto(f"{live_server.url}/sessions/{outcome.session}/")
    page.click("text=Token timeline")
    wait_until(page, "() => document.getElementById('chart').uplot !== undefined")
    marker_row = page.locator("tr.marker-compaction")
    assert "155,250 tokens before" in marker_row.inner_text() and "(auto)" in marker_row.inner_text()
    # The chart draws the marker: the canvas pixel on the marker's x is the marker colour.
    drawn = page.evaluate(
        """() => {
        const u = document.getElementById('chart').uplot;
        const data = JSON.parse(document.getElementById('timeline-data').textContent);
        const m = data.markers.find(m => m.kind === 'compaction');
        const x = Math.round(u.valToPos(m.x, 'x', true));
        const y = Math.round(u.bbox.top + u.bbox.height / 2);
        const px = u.ctx.getImageData(x, y, 1, 1).data;
        return [px[0], px[1], px[2]];
    }"""
    )
    assert drawn[0] > 180 and drawn[2] < 100  # orange (#d97706), not background
    # Click the call right after the compaction (49,761 tokens).
    x, y = page.evaluate(
        """() => {
        const u = document.getElementById('chart').uplot;
        const data = JSON.parse(document.getElementById('timeline-data').textContent);
        const p = data.series.main.find(p => p.context === 49761);
        const r = u.over.getBoundingClientRect();
        return [r.left + u.valToPos(p.x, 'x'), r.top + u.valToPos(p.context, 'y')];
    }"""
    )
    page.mouse.move(x, y)
    # Hover shows the numbers of that call in the legend.
    wait_until(page, "() => document.querySelector('.u-legend').innerText.includes('49,761')")
    page.mouse.click(x, y)
    page.wait_for_selector(".turn-detail")
    detail = page.inner_text("#turn")
    assert "Main chain, call" in detail and "49,761" in detail
    assert "compaction summary" in detail  # what filled the context right after the compaction
    wait_until(page, "() => document.querySelector('.composition-chart canvas') !== null")
    assert page.errors == []


def test_a_timeline_point_opens_the_layers_waterfall(page, live_server):
    # entirecli_f9f6f611b469 (2.1.20): a real microcompact of 29 results right before the auto compaction.
    outcome = services.import_file(path=CLAUDE_SAMPLES / "entirecli_f9f6f611b469-0_full.jsonl")
    page.goto(f"{live_server.url}/sessions/{outcome.session}/timeline/")
    wait_until(page, "() => document.getElementById('chart').uplot !== undefined")
    # Click the first call after the microcompact: the layers that ran before its request.
    x, y = page.evaluate(
        """() => {
        const u = document.getElementById('chart').uplot;
        const data = JSON.parse(document.getElementById('timeline-data').textContent);
        const m = data.markers.find(m => m.kind === 'microcompact');
        const p = data.series.main.find(p => p.call === m.after_call);
        const r = u.over.getBoundingClientRect();
        return [r.left + u.valToPos(p.x, 'x'), r.top + u.valToPos(p.context, 'y')];
    }"""
    )
    page.mouse.move(x, y)
    page.mouse.click(x, y)
    page.wait_for_selector(".turn-detail table.waterfall")
    rows = page.locator("table.waterfall tr.layer")
    assert rows.count() == 6
    names = page.inner_text("table.waterfall")
    for name in ("Tool-result budget", "Snip", "Microcompact", "Context collapse", "Autocompact", "Blocking check"):
        assert name in names
    # The bars are drawn: each layer's bar has a width.
    widths = page.evaluate(
        "() => [...document.querySelectorAll('table.waterfall .bar')].map(b => b.getBoundingClientRect().width)"
    )
    assert len(widths) == 7 and all(w > 0 for w in widths)
    microcompact = page.inner_text("table.waterfall tr.layer-3")
    assert "acts" in microcompact and "29 tool results" in microcompact
    assert page.errors == []
