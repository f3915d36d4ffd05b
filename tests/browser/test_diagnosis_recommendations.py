"""The diagnosis page leads with what to change, reads as text, and its "try it" link opens the replay."""

from __future__ import annotations

import re

import pytest

from sessions_app import services
from tests.browser.conftest import wait_until
from tests.conftest import CLAUDE_SAMPLES, KLAUDE_SAMPLES

pytestmark = pytest.mark.browser

OVERFLOW = KLAUDE_SAMPLES / "dot-klaude/projects/home-dev-projects-webapp/sessions/e403978267e543c9ae7335a01662e2ce"


def json_keys(value: object) -> set[str]:
    """Every key of a JSON document, at any depth."""
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in json_keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in json_keys(v)}
    return set()


def test_recommendations_first_readable_and_try_it_opens_the_replay(page, live_server):
    [outcome] = services.import_paths(paths=[OVERFLOW / "events.jsonl"]).imported
    url = f"{live_server.url}/sessions/{outcome.session}/diagnosis/"
    page.goto(url)

    # Recommendations come first: the first heading after the verdict is "What to change".
    headings = page.locator("main h2, body h2").all_inner_texts()
    assert headings[0] == "What to change"
    first = page.locator("article.recommendation").first
    assert "Large Read outputs" in first.inner_text()
    assert first.bounding_box()["y"] < page.locator("text=Threshold crossings").bounding_box()["y"]

    # No raw dict and no key of the report's JSON in the visible text.
    text = page.inner_text("body")
    assert not re.search(r"[\[{]\s*'\w+'\s*:", text)
    report = page.request.get(f"{live_server.url}/sessions/{outcome.session}/diagnosis.json").json()
    snake = {key for key in json_keys(report) if "_" in key}
    assert snake and [key for key in snake if key in text] == []
    assert "15,078 below" in text  # signed wording, thousands separators

    # "Try it" opens the what-if replay with the recommendation's change set.
    link = first.locator("a.try-it")
    href = link.get_attribute("href")
    cap = re.search(r"cap_chars=(\d+)", href or "")
    assert cap is not None and "cap_tool=Read" in href and "replay=klaude-code" in href
    link.click()
    page.wait_for_selector("tr.replay-row[data-strategy=klaude-code]")
    assert page.input_value("input[name=cap_chars]") == cap.group(1)
    assert page.input_value("input[name=cap_tool]") == "Read"
    row = page.inner_text("tr.replay-row[data-strategy=klaude-code]")
    assert f"Read results capped at {int(cap.group(1)):,} characters" in row
    cells = page.locator("tr.replay-row[data-strategy=klaude-code] td.num").all_inner_texts()
    assert cells[3] == "0"  # no overflow in the replay with the cap
    wait_until(page, "() => document.getElementById('chart')?.uplot !== undefined")

    # The second finding's link sets a strategy parameter instead.
    page.goto(url)
    burst = page.locator("article.recommendation[data-kind=late_arrivals] a.try-it")
    burst.click()
    page.wait_for_selector("tr.replay-row[data-strategy=klaude-code]")
    assert page.input_value("input[name='klaude-code.reserve_tokens']") == "32000"
    assert page.errors == []


def test_timeline_shows_cost_per_call_and_a_cumulative_cost_line(page, live_server):
    outcome = services.import_file(path=CLAUDE_SAMPLES / "entirecli_a6e4c2a0fbd1-0_full.jsonl")
    page.goto(f"{live_server.url}/sessions/{outcome.session}/timeline/")
    wait_until(page, "() => document.getElementById('chart')?.uplot !== undefined")
    shown = "() => document.getElementById('chart').uplot.series.find(s => s.label === 'cumulative cost').show"
    assert page.evaluate(shown) is False
    page.check("#show-cost")
    assert page.evaluate(shown) is True
    # Hovering a call: its tooltip carries the call's cost.
    page.evaluate(
        "() => { const u = document.getElementById('chart').uplot;"
        " u.setCursor({left: u.valToPos(u.data[0][3], 'x'), top: 10}); }"
    )
    legend = page.inner_text(".chart-tooltip")
    assert re.search(r"\d[\d,]* tokens · \$\d+\.\d+", legend)
    assert page.errors == []
