"""Subagents in the browser (issue 37): an inline subagent and a file subagent open in place from the spawning call in
their parent's transcript, their cost is in the session's totals, and the compaction request sits at its call on
the timeline and at its compaction in the transcript. One imported session for the module's one test."""

from __future__ import annotations

import json

import pytest

from sessions_app import models, services
from tests.browser.conftest import wait_until
from tests.helpers.subagent_sessions import COMPACT, FILE, FILE_REPLY, INLINE, INLINE_REPLY, subagent_session

pytestmark = pytest.mark.browser


def test_subagents_open_in_place_count_in_the_totals_and_the_summariser_sits_at_its_call(page, live_server, tmp_path):
    report = services.import_paths(paths=[subagent_session(tmp_path)])
    session = models.Session.objects.get(pk=report.imported[0].session)
    page.goto(f"{live_server.url}/sessions/{session.pk}/")

    for agent, reply in ((INLINE, INLINE_REPLY), (FILE, FILE_REPLY)):
        call = page.locator("details.tool-use", has=page.locator(f"details[data-subagent='{agent}']"))
        call.locator(":scope > summary").click()  # the Task call, folded to one line, opens in place
        sub = call.locator(f"details[data-subagent='{agent}']")
        assert sub.get_attribute("open") is None and "1 call" in sub.locator(":scope > summary").inner_text()
        sub.locator(":scope > summary").click()  # its records load into it (htmx, on open)
        sub.locator(".subagent-body li.msg").first.wait_for()
        assert reply in sub.locator(".subagent-body").inner_text()
    assert "inline" in page.locator(f"details[data-subagent='{INLINE}'] .subagent-kind").inner_text()
    assert "file" in page.locator(f"details[data-subagent='{FILE}'] .subagent-kind").inner_text()
    assert page.url.endswith(f"/sessions/{session.pk}/")  # everything opened in place

    totals = page.locator("#subagent-totals").inner_text()
    assert "3 subagents (1 inline, 2 from their own files)" in totals
    assert f"of the session's ${session.cost_usd:.2f}" in totals

    # The compaction request opens at the compaction, in the main transcript.
    compaction = page.locator("li.msg", has=page.locator(".event-compaction"))
    summariser = compaction.locator(f"details[data-subagent='{COMPACT}']")
    assert "Compaction request" in summariser.locator(":scope > summary").inner_text()
    summariser.locator(":scope > summary").click()
    summariser.locator(".subagent-body li.msg").first.wait_for()
    assert "<summary>" in summariser.locator(".subagent-body").inner_text()

    # On the timeline it sits at the call where it ran (the compaction's), not after the last call.
    page.goto(f"{live_server.url}/sessions/{session.pk}/timeline/")
    wait_until(page, "!!document.getElementById('timeline-data')")
    data = json.loads(page.locator("#timeline-data").text_content())
    (event,) = [e for e in data["events"] if e["kind"] == "compaction"]
    assert [p["x"] for p in data["series"][COMPACT]] == [event["x"]] == [3]
    assert data["series"]["main"][-1]["x"] == 4
    assert data["cost"]["total_usd"] == pytest.approx(session.cost_usd, abs=1e-6)
    assert page.errors == []
