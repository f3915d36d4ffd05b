"""Reading a transcript in the browser: a folded tool call opens in place, filter chips keep their state in the
URL, j / k move between records. One imported session of our own for the module's one test."""

from __future__ import annotations

import pytest

from sessions_app import services
from tests.helpers.claude_code_lines import cc_session

pytestmark = pytest.mark.browser


def test_folded_calls_filter_chips_and_keyboard_navigation(page, live_server, tmp_path):
    outcome = services.import_file(path=cc_session(tmp_path))
    assert isinstance(outcome, services.FileImport)
    url = f"{live_server.url}/sessions/{outcome.session}/"
    page.goto(url)

    call = page.locator("details.tool-use").first
    assert call.get_attribute("open") is None and "/src/app.py" in call.locator(":scope > summary").inner_text()
    assert not call.locator(".tool-result").is_visible()
    call.locator(":scope > summary").click()
    assert call.get_attribute("open") is not None and call.locator(".tool-result").is_visible()
    assert page.url == url  # opened in place

    records = page.locator("#transcript li.msg")
    everything = records.count()
    page.click("[data-chip=prompts]")
    page.wait_for_url("**show=prompts**")
    page.wait_for_selector("[data-chip=prompts][aria-pressed=true]")
    assert records.count() == 2 and page.locator("#transcript li.msg.kind-prompt").count() == 2
    page.reload()  # the URL holds the state
    assert records.count() == 2
    page.click("[data-chip=prompts]")
    page.wait_for_selector("[data-chip=prompts][aria-pressed=false]")
    assert records.count() == everything and "show=" not in page.url

    focused = "() => document.activeElement.id"
    page.keyboard.press("j")
    first = page.evaluate(focused)
    page.keyboard.press("j")
    second = page.evaluate(focused)
    page.keyboard.press("k")
    assert first == records.nth(0).get_attribute("id") and second == records.nth(1).get_attribute("id")
    assert page.evaluate(focused) == first
    page.keyboard.press("j")
    page.keyboard.press("j")  # the third record: the tool call, folded, its result under it
    third = records.nth(2).locator("details.tool-use").first
    assert third.get_attribute("open") is None
    page.keyboard.press("o")  # opens the record's calls
    assert third.get_attribute("open") is not None and third.locator(".tool-result").is_visible()
    page.keyboard.press("o")  # all open: o folds them again
    assert third.get_attribute("open") is None
    page.locator("form.search input[name=q]").press("j")  # typing in a field never moves between records
    assert page.locator("#transcript li.msg.current").get_attribute("id") == records.nth(2).get_attribute("id")
    assert page.errors == []


def test_the_json_link_and_the_session_search_follow_the_chips(page, live_server, tmp_path):
    # The JSON link dropped the chips (and the search) and kept the page it was loaded with; the session search kept
    # the chips the page was loaded with, and added its fields to the address again at each search.
    outcome = services.import_file(path=cc_session(tmp_path))
    assert isinstance(outcome, services.FileImport)
    page.goto(f"{live_server.url}/sessions/{outcome.session}/?show=prompts")
    twin = "() => { const a = document.querySelector('a[data-twin]'); return a.pathname + a.search; }"
    assert page.evaluate(twin) == f"/sessions/{outcome.session}.json?show=prompts"
    page.click("[data-chip=prompts]")  # off
    page.wait_for_selector("[data-chip=prompts][aria-pressed=false]")
    assert page.evaluate(twin) == f"/sessions/{outcome.session}.json?agent=main"
    page.click("[data-chip=tools]")
    page.wait_for_url("**show=tools**")
    assert page.evaluate(twin) == f"/sessions/{outcome.session}.json?agent=main&show=tools"
    page.fill("form.search input[name=q]", "app")
    page.click("form.search button[type=submit]")
    page.wait_for_url("**q=app**")
    query = page.url.split("?", 1)[1].split("&")
    assert sorted(query) == ["agent=main", "q=app", "show=tools"]
    assert page.evaluate(twin) == f"/sessions/{outcome.session}.json?" + page.url.split("?", 1)[1]
    assert page.errors == []
