"""The compaction-instructions lab in a browser: two variants at two points, run by the real worker against the
scripted Anthropic API, both finished and compared side by side."""

from __future__ import annotations

import pytest

from tests.anthropic_server import ok
from tests.browser.conftest import SUMMARY
from tests.helpers.claude_code_lines import cc_session
from tests.helpers.runs import imported

pytestmark = pytest.mark.browser
VARIANTS = ["Keep every file path and command.", "Be brief: list only the open tasks."]


def test_two_variants_at_two_points_finish_and_compare_side_by_side(page, live_server, tmp_path, anthropic_api, worker):
    session = imported(cc_session(tmp_path))
    anthropic_api.script(*(ok(SUMMARY, output_tokens=40 + 10 * n) for n in range(4)))

    page.goto(f"{live_server.url}/sessions/{session.pk}/")
    page.click("text=Instructions lab")
    page.fill("#lab-points", "2, 4")
    page.fill("#lab-variant1", VARIANTS[0])
    page.fill("#lab-variant2", VARIANTS[1])
    page.uncheck("input[name=baseline]")
    page.click("#lab-run")
    page.wait_for_url(f"{live_server.url}/labs/*/")
    # The grid polls until the worker has finished all four runs.
    page.wait_for_selector("#lab-grid[data-finished=true]", timeout=30_000)

    rows = page.locator("tr.lab-variant")
    assert rows.count() == 2
    assert [rows.nth(i).locator("td.quoted").inner_text() for i in range(2)] == VARIANTS
    assert [rows.nth(i).locator("td.num").first.inner_text() for i in range(2)] == ["2/2", "2/2"]
    assert all("/" in rows.nth(i).locator(".lab-score").inner_text() for i in range(2))  # a checklist score each
    assert all("%" in rows.nth(i).locator(".lab-claims").inner_text() for i in range(2))  # and a claims score
    assert page.locator("td.lab-cell[data-status=succeeded]").count() == 4
    points = page.locator("table.lab-cells tbody th").all_inner_texts()
    assert [p.split(" (")[0] for p in points] == ["after call 2", "after call 4"]
    # Each request carried its variant as Claude Code's /compact does.
    last_texts = [
        "".join(b.get("text", "") for b in body["messages"][-1]["content"]) for body in anthropic_api.requests
    ]
    sent = sorted(v for text in last_texts for v in VARIANTS if f"Additional Instructions:\n{v}" in text)
    assert sent == sorted(VARIANTS * 2)
    assert page.errors == []  # type: ignore[attr-defined]
