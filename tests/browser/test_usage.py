"""The Usage page in a browser: the stacked chart (one bar per group, stacks in the agents' colours), the filters
(the URL keeps them), and the CSV download (a header row and one row per group)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from tests.browser.conftest import wait_until
from tests.helpers.usage_sessions import import_usage, import_usage_inline

pytestmark = pytest.mark.browser


def test_usage_chart_filters_and_csv(page, live_server, tmp_path):
    import_usage(tmp_path, "b-one", "2026-01-05T12:00:00.000Z", "2026-01-07T12:00:00.000Z")
    import_usage(tmp_path, "b-two", "2026-01-07T13:00:00.000Z", model="claude-sonnet-4-5-20250929")
    import_usage_inline(tmp_path, "b-three", "2026-01-09T12:00:00.000Z")
    page.goto(f"{live_server.url}/")
    page.click("header nav a:text('Usage')")
    page.wait_for_url("**/usage/")
    page.goto(f"{live_server.url}/usage/?tz=UTC")

    # One bar per day, stacked by model: the 7th holds both models.
    wait_until(page, "document.querySelectorAll('#usage-chart g.usage-bar').length === 3")
    bars = page.eval_on_selector_all(
        "#usage-chart g.usage-bar",
        "bars => bars.map(b => [b.dataset.group, [...b.querySelectorAll('rect')].map(r => r.dataset.series)])",
    )
    assert [group for group, _ in bars] == ["2026-01-05", "2026-01-07", "2026-01-09"]
    assert sorted(bars[1][1]) == ["claude-opus-4-5-20251101", "claude-sonnet-4-5-20250929"]
    assert page.locator("#usage-chart ul.legend li").count() == 3  # two models and the inline subagent's
    # The bars' heights follow the costs of the table's rows.
    heights = page.eval_on_selector_all("#usage-chart g.usage-bar", "bars => bars.map(b => Number(b.dataset.total))")
    costs = [float(c.replace("$", "")) for c in page.locator("#usage-table tbody td.cost").all_inner_texts()]
    assert [round(h, 2) for h in heights] == pytest.approx(costs, abs=0.011)

    # Stacked by agent: the stack wears the agent's colour from the served agents.css; the URL keeps the choice.
    page.select_option("select[name=stack]", "agent")
    page.wait_for_url("**stack=agent**")
    wait_until(page, "document.querySelector('#usage-chart rect[data-series=claude-code]') !== null")
    fill, expected = page.evaluate(
        """() => [document.querySelector('#usage-chart rect[data-series=claude-code]').getAttribute('fill'),
                  getComputedStyle(document.documentElement).getPropertyValue('--agent-claude-code').trim()]"""
    )
    assert expected and fill == expected

    # Filters: one model's calls only; then all again, by month, then by day.
    page.select_option("select[name=model]", "claude-sonnet-4-5-20250929")
    page.wait_for_url("**model=claude-sonnet**")
    wait_until(page, "document.querySelectorAll('#usage-table tbody tr').length === 1")
    assert page.locator("#usage-table tbody th").inner_text().strip() == "2026-01-07"
    page.select_option("select[name=model]", "")
    page.select_option("select[name=by]", "month")
    page.wait_for_url("**by=month**")
    wait_until(page, "document.querySelectorAll('#usage-table tbody tr').length === 1")
    assert page.locator("#usage-table tbody th").inner_text().strip() == "2026-01"
    page.select_option("select[name=by]", "day")
    page.wait_for_url("**by=day**")
    wait_until(page, "document.querySelectorAll('#usage-table tbody tr').length === 3")

    # The CSV download: the same report, a header row and one row per group.
    groups = page.locator("#usage-table tbody th").count()
    with page.expect_download() as download:
        page.click("a:text('Download CSV')")
    rows = list(csv.reader(io.StringIO(Path(download.value.path()).read_text())))
    assert rows[0][0] == "group" and "cost_usd" in rows[0]
    assert len(rows) == 1 + groups
    assert page.errors == []  # type: ignore[attr-defined]
