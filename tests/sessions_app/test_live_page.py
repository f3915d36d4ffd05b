"""A live page that stays whole: the overview and the timeline's numbers as partials; a compaction announced once."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sessions_app import models, services
from sessions_app.selectors import live as live_selectors
from tests.helpers.live_session import compact_lines, rising_calls

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def _text(html: str) -> str:
    """What a reader sees: the markup without its tags."""
    return re.sub(r"<[^>]+>", "", html)


def _import(path: Path) -> models.Session:
    outcome = services.import_file(path=path)
    assert isinstance(outcome, services.FileImport) and outcome.session is not None, outcome
    return models.Session.objects.get(pk=outcome.session)


def _tile(html: str, name: str) -> str:
    found = re.search(rf"<dt>{name}</dt><dd class=\"num\">([^<]*)", html)
    assert found, name
    return found.group(1).strip()


@pytest.fixture
def grown(tmp_path: Path) -> tuple[Path, models.Session]:
    """A live session of three calls whose context rises."""
    path = tmp_path / "-home-me-proj" / "live-1.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text(rising_calls([10_000, 30_000, 50_000]))
    return path, _import(path)


def _compact(path: Path) -> None:
    with path.open("a") as f:
        f.write(compact_lines(parent="a3", pre_tokens=52_000) + rising_calls([8_000], start=4, parent="sum1"))


def test_live_json_carries_the_events_and_the_latest(client_in, grown):
    path, session = grown
    first = client_in.get(f"/sessions/{session.pk}/live.json").json()
    assert first["events"] == 0 and first["latest_event"] is None
    _compact(path)
    services.import_file(path=path)
    grown_json = client_in.get(f"/sessions/{session.pk}/live.json").json()
    assert grown_json["events"] == 1
    assert grown_json["latest_event"] == {
        "kind": "compaction",
        "seq": grown_json["latest_event"]["seq"],
        "after_call": 3,
        "trigger": "auto",
        "tokens_before": 52_000,
        "tokens_after": 8_000,
    }
    assert grown_json["version"] != first["version"]


def test_a_compaction_is_announced_once_on_the_poll_that_finds_it(client_in, grown):
    path, session = grown
    before = client_in.get(f"/sessions/{session.pk}/live.json").json()
    _compact(path)
    services.import_file(path=path)

    def poll(**params: object) -> str:
        response = client_in.get(f"/sessions/{session.pk}/live/", {"seen": before["version"], **params}, **HTMX)
        assert response["HX-Trigger"] == "session-grew"
        return response.content.decode()

    found = poll(crossings=0, events=0)
    assert found.count('role="alert"') == 1  # 52,000 crossed no line: the compaction is the one announcement
    assert '<li class="live-event live-event-new live-event-compaction" role="alert">' in found
    # "after call 3" links to the call on the timeline and to Preview at that point, as every call number does.
    assert "Compacted after call 3 (preview): 52,000 → 8,000 tokens" in _text(found)
    assert f'href="/sessions/{session.pk}/preview/?at=3"' in found
    # The page passes on what it has now seen: the next poll shows the event, but does not announce it again.
    assert "&amp;events=1" in found
    later = poll(crossings=0, events=1)
    assert "live-event-new" not in later and "Compacted after call 3 (preview): 52,000 → 8,000 tokens" in _text(later)
    assert "live-event-new" not in poll(crossings=0)  # the first render of a page announces nothing
    # A session re-imported smaller than the page saw (a rewritten file): nothing to announce, no error.
    assert "live-event-new" not in poll(crossings=0, events=5)


def test_latest_event_reads_the_context_either_side_by_record_order():
    points = [(1, 10, 100), (2, 20, 200), (3, 40, 50)]
    kinds = [("microcompact", 15, 1, "", None, None), ("compaction", 30, 2, "manual", None, None)]
    latest = live_selectors.latest_event(events=kinds, points=points)
    assert latest is not None
    assert (latest.verb, latest.after_call, latest.before, latest.after) == ("Compacted", 2, 200, 50)
    # The event's own numbers win; no call after it yet: no "after".
    last = live_selectors.latest_event(events=[("prune", 50, 3, "", 70, None)], points=points)
    assert last is not None and (last.verb, last.before, last.after) == ("Pruned", 70, None)
    assert live_selectors.latest_event(events=[], points=points) is None


def test_overview_partial_follows_an_incremental_import(client_in, grown, settings, django_assert_max_num_queries):
    settings.LIVE_POLL_SECONDS = 1
    path, session = grown
    page = client_in.get(f"/sessions/{session.pk}/").content.decode()
    assert f'hx-get="/sessions/{session.pk}/live/overview/"' in page
    assert 'hx-trigger="session-grew from:body, every 1s"' in page  # not analysed yet: it refreshes until it lands
    # A fixed few queries whatever the session's size: the overview's (its counts in the database) and the first
    # glance's (the main chain's calls and cuts for the sparkline, about eight for the subagents' costs).
    with django_assert_max_num_queries(14):
        before = client_in.get(f"/sessions/{session.pk}/live/overview/", **HTMX).content.decode()
    assert "<html" not in before and 'id="overview-live"' in before and 'id="overview"' in before
    assert (_tile(before, "API calls"), _tile(before, "Compactions")) == ("3", "0")
    assert "<strong>50,000</strong>" in before

    _compact(path)
    with path.open("a") as f:
        f.write(rising_calls([60_000], start=5, parent="a4"))
    services.import_file(path=path)
    with django_assert_max_num_queries(14):
        after = client_in.get(f"/sessions/{session.pk}/live/overview/", **HTMX).content.decode()
    assert (_tile(after, "API calls"), _tile(after, "Compactions")) == ("5", "1")
    assert "<strong>60,000</strong>" in after and "Computing" in after and "every 1s" in after

    # The worker's analysis of this version lands: the composition and the verdict, and no more polling.
    services.estimate_session_tokens(session_id=session.pk)
    services.analyse_session(session_id=session.pk)
    landed = client_in.get(f"/sessions/{session.pk}/live/overview/", **HTMX).content.decode()
    assert "Computing" not in landed and "every 1s" not in landed and 'hx-trigger="session-grew from:body"' in landed
    assert "treemap" in landed


def test_timeline_numbers_partial_follows_an_incremental_import(client_in, grown, django_assert_max_num_queries):
    path, session = grown
    page = client_in.get(f"/sessions/{session.pk}/timeline/", {"strategy": "claude-code"}).content.decode()
    assert f'hx-get="/sessions/{session.pk}/live/timeline/?strategy=claude-code"' in page
    assert 'hx-select-oob="#timeline-cost,#timeline-events"' in page
    url = f"/sessions/{session.pk}/live/timeline/"
    before = client_in.get(url, {"strategy": "claude-code"}, **HTMX).content.decode()
    assert "<html" not in before and "3 API calls on the main chain" in before
    assert 'id="timeline-cost"' in before and 'id="timeline-events"' in before
    assert "No compaction, prune, error or cache event." in before

    _compact(path)
    services.import_file(path=path)
    with django_assert_max_num_queries(12):  # timeline_selectors.timeline.timeline's fixed number, no replay asked
        after = client_in.get(url, {"strategy": "claude-code"}, **HTMX).content.decode()
    assert "4 API calls on the main chain" in after
    assert 'class="marker marker-compaction"' in after and "52,000 tokens before" in after
    assert "<b>SUMMARY</b>" not in after  # the record's own text is escaped (here: not shown at all)


def test_the_agents_panel_follows_a_live_session_as_the_overview_does(client_in, grown):
    # The overview refreshed on session-grew but the Agents panel beside the transcript did not: after two more
    # calls the page said "API calls 5" above and "Main chain 3 calls, peak 50,000" beside.
    path, session = grown
    page = client_in.get(f"/sessions/{session.pk}/?agent=main").content.decode()
    panel = page.split('<aside class="agents"')[1].split("</aside>")[0]
    assert 'hx-trigger="session-grew from:body"' in panel and 'id="agents"' in panel
    assert "3 calls, peak 50,000" in _text(panel)
    _compact(path)
    with path.open("a") as f:
        f.write(rising_calls([60_000], start=5, parent="a4"))
    services.import_file(path=path)
    url = re.search(r'<aside class="agents"[^>]*hx-get="([^"]*)"', page).group(1).replace("&amp;", "&")
    fresh = client_in.get(url, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="agents").content.decode()
    assert "<html" not in fresh and 'id="agents"' in fresh and 'id="transcript"' not in fresh
    assert "5 calls, peak 60,000" in _text(fresh) and 'class="depth-0 current"' in fresh
