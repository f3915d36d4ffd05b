"""Browse like a reader: search from the list and land on the match, follow a Task call to its subagent and back,
read markdown replies, page through a transcript, read the timeline in calls."""

from __future__ import annotations

import pytest

from sessions_app import models, services
from sessions_app.selectors import agents as agent_selectors
from tests.browser.conftest import wait_until
from tests.helpers.claude_code_lines import assistant, user, write
from tests.helpers.sample_sessions import SPOTTER, SUBAGENT, SUBAGENT_PHRASE

pytestmark = pytest.mark.browser


@pytest.fixture
def spotter(transactional_db) -> models.Session:
    services.import_paths(paths=[SPOTTER, SPOTTER.with_suffix("") / "subagents" / f"agent-{SUBAGENT}.jsonl"])
    return models.Session.objects.get(files__path=str(SPOTTER.resolve()))


def test_search_from_the_list_lands_on_the_highlighted_record(page, live_server, spotter):
    page.fill("form.filters input[name=q]", SUBAGENT_PHRASE)
    page.keyboard.press("Enter")
    hit = page.locator(".found-sessions .hit-link").first
    hit.wait_for()
    assert "I also found references to version" in page.inner_text(".found-sessions")
    hit.click()
    page.wait_for_url(f"**agent={SUBAGENT}**")
    seq = page.url.rsplit("#m", 1)[1]
    record = page.locator(f"#m{seq}")
    assert record.locator("mark.hit").first.inner_text() == "I also found references to version"
    assert record.is_visible()
    page.click("button[data-step-match='1']")
    assert page.locator("#transcript mark.hit.current").count() == 1
    assert page.inner_text("#match-counter").startswith("1 / ")
    assert page.errors == []


def test_ctrl_k_searches_everything_from_any_page_and_lands_on_the_record(page, live_server, spotter):
    page.goto(f"{live_server.url}/sessions/{spotter.pk}/timeline/")
    page.keyboard.press("Control+k")
    assert page.evaluate("document.activeElement.id") == "quick-search-q"
    page.keyboard.type(SUBAGENT_PHRASE)
    hit = page.locator("#quick-results .hit-link").first
    hit.wait_for()
    assert page.locator("#quick-results").is_visible()
    assert page.locator("#quick-results .found-title").first.inner_text().startswith(spotter.title[:20])
    assert hit.locator("mark.hit").inner_text() == "I also found references to version"
    page.keyboard.press("Escape")
    assert page.locator("#quick-results").is_hidden()
    page.keyboard.press("Control+k")  # opens the same results again
    assert page.locator("#quick-results").is_visible()
    page.keyboard.press("ArrowDown")  # the arrows step through the session and record links
    assert page.evaluate("document.activeElement.classList.contains('found-title')")
    page.keyboard.press("ArrowDown")
    assert page.evaluate("document.activeElement.classList.contains('hit-link')")
    page.keyboard.press("Enter")
    page.wait_for_url(f"**agent={SUBAGENT}**")
    seq = page.url.rsplit("#m", 1)[1]
    assert page.locator(f"#m{seq} mark.hit").first.inner_text() == "I also found references to version"
    assert page.errors == []


def test_the_quick_search_stays_within_the_lists_filters(page, live_server, spotter):
    page.select_option("form.filters select[name=agent]", "klaude-code")
    page.wait_for_url("**agent=klaude-code**")
    page.keyboard.press("Control+k")
    page.keyboard.type(SUBAGENT_PHRASE)
    summary = page.locator("#quick-results .search-summary")
    summary.wait_for()
    assert summary.inner_text().startswith("0 records in 0 sessions") and "within: klaude-code" in summary.inner_text()
    page.keyboard.press("Enter")  # the full search page, same scope
    page.wait_for_url("**/search/?**")
    assert "agent=klaude-code" in page.url
    assert page.locator(".search-page-form select[name=agent]").input_value() == "klaude-code"
    assert page.errors == []


def test_follow_a_task_call_to_its_subagent_and_back(page, live_server, spotter):
    [spawn] = [s for s in agent_selectors.subagent_spawns(session=spotter).values() if s.agent == SUBAGENT]
    page.goto(f"{live_server.url}/sessions/{spotter.pk}/m/{spawn.seq}/")
    link = page.locator(f"#m{spawn.seq} a.subagent-link")
    assert spawn.description in page.inner_text(f"#m{spawn.seq}")
    # The spawning call is folded to its one line (tool, task): it opens in place, and the link is inside.
    call = page.locator(f"#m{spawn.seq} details.tool-use", has=page.locator("a.subagent-link"))
    assert call.get_attribute("open") is None
    call.locator("summary").first.click()
    # The subagent is folded in the call too (it opens in place); its own page is a link inside.
    call.locator("details.subagent-inline > summary").click()
    link.click()
    page.wait_for_url(f"**agent={SUBAGENT}**")
    assert page.locator(".agents li.current").inner_text().startswith(spawn.description)
    page.click("a.spawn-link")
    page.wait_for_url(f"**#m{spawn.seq}")
    assert "agent=main" in page.url
    assert page.locator(f"#m{spawn.seq}").is_visible()
    assert page.errors == []


def test_a_markdown_reply_renders_as_html_and_raw_html_stays_text(page, live_server, tmp_path, transactional_db):
    reply = "# Findings\n\n- one\n- two\n\n```python\nprint('hi')\n```\n\n<script>window.__pwned = 1</script>"
    path = write(
        tmp_path, "md.jsonl", user("u1", None, "report please"), assistant("a1", "u1", "msg_1", reply, ctx=100)
    )
    services.import_paths(paths=[path])
    session = models.Session.objects.get()
    page.goto(f"{live_server.url}/sessions/{session.pk}/")
    md = page.locator("#transcript .md").filter(has_text="Findings")  # the prompt is markdown too
    assert md.locator("h1").inner_text() == "Findings"
    assert md.locator("ul li").count() == 2
    assert md.locator("pre code.language-python span").count() > 0  # Pygments tokens
    assert "<script>window.__pwned = 1</script>" in md.inner_text()
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#transcript script").count() == 0
    assert page.errors == []


def test_the_search_panel_shows_untrusted_text_and_runs_none_of_it(page, live_server, tmp_path, transactional_db):
    evil = '<script>window.__pwned = 1</script> <img src=x onerror="window.__pwned = 2"> pwnedmarker'
    path = write(tmp_path, "evil.jsonl", user("u1", None, evil), assistant("a1", "u1", "msg_1", evil, ctx=100))
    services.import_paths(paths=[path])
    page.goto(f"{live_server.url}/")
    page.keyboard.press("Control+k")
    page.keyboard.type("pwnedmarker")
    page.locator("#quick-results .hit-link").first.wait_for()
    page.wait_for_timeout(200)
    assert "<script>window.__pwned = 1</script>" in page.inner_text("#quick-results")
    assert page.locator("#quick-results script, #quick-results img").count() == 0
    assert page.evaluate("window.__pwned") is None
    assert page.errors == []


def test_the_transcript_pager_moves_to_page_two(page, live_server, spotter):
    page.goto(f"{live_server.url}/sessions/{spotter.pk}/")
    first = page.locator("#transcript li.msg").first.get_attribute("id")
    page.locator("#transcript a:has-text('Next')").first.click()
    wait_until(page, "() => location.search.includes('page=2')")
    page.wait_for_selector("#transcript li.msg")
    assert page.locator("#transcript li.msg").first.get_attribute("id") != first
    assert page.errors == []


def test_the_timeline_reads_calls_and_a_subagent_starts_at_its_spawn_call(page, live_server, spotter):
    [spawn] = [s for s in agent_selectors.subagent_spawns(session=spotter).values() if s.agent == SUBAGENT]
    page.goto(f"{live_server.url}/sessions/{spotter.pk}/timeline/")
    wait_until(page, "() => document.getElementById('chart')?.uplot !== undefined")
    axis = page.evaluate(
        "() => { const a = document.getElementById('chart').uplot.axes[0]; return [a.label, a._splits]; }"
    )
    assert axis[0] == "main-chain API call"
    assert axis[1] and all(float(v).is_integer() for v in axis[1])  # integer ticks only
    start = page.evaluate(
        f"""() => {{
        const u = document.getElementById('chart').uplot;
        const s = u.series.findIndex(s => s.label === '{SUBAGENT} context');
        const i = u.data[s].findIndex(v => v != null);
        return u.data[0][i];
    }}"""
    )
    assert start == spawn.call
    assert page.locator("#marker-legend input[data-kind=compaction]").count() == 1
    assert page.errors == []


def test_the_lists_search_filters_as_you_type_and_htmx_reads_every_trigger(page, live_server, spotter, tmp_path):
    # htmx reads a `from:` selector with a space only in parentheses: without them it logged htmx:syntax:error
    # on every list page and listened to every key of the form.
    other = write(
        tmp_path, "other.jsonl", user("u1", None, "a zebrafinch prompt"), assistant("a1", "u1", "m1", "ok", ctx=100)
    )
    services.import_paths(paths=[other])
    console: list[str] = []
    page.on("console", lambda message: message.type == "error" and console.append(message.text))
    page.reload()
    assert page.inner_text("#results p.muted").startswith("2 sessions")
    page.click("form.filters input[name=q]")
    page.keyboard.type("zebrafinch")
    wait_until(page, "document.querySelector('#results p.muted').innerText.startsWith('1 session ')")
    assert "q=zebrafinch" in page.url
    assert console == [] and page.errors == []
