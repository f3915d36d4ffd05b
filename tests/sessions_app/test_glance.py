"""The first glance at the head of a session page (selectors/glance.py): the sparkline is the timeline's series, the
treemap the composition at the peak, the subagents' costs the session's own split by agent."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from compaction.transcript import MAIN
from sessions_app import models, services
from sessions_app.selectors import agents as agent_selectors
from sessions_app.selectors import glance
from sessions_app.selectors import overview as overview_selectors
from sessions_app.selectors import timeline as timeline_selectors
from sessions_app.selectors.sessions import SessionFilters
from sessions_app.selectors.usage import UsageQuery, usage_report
from tests.conftest import CLAUDE_SAMPLES, KHAELOR_SAMPLES

pytestmark = pytest.mark.django_db

MICRO_THEN_COMPACT = CLAUDE_SAMPLES / "entirecli_7662d755ef9f-2_full.jsonl"  # a microcompact, then a compaction
INLINE_SUBAGENTS = CLAUDE_SAMPLES / "cipherbox_c644f3afc869-1_full.jsonl"  # two subagents known by progress records


def _analysed(path) -> models.Session:
    services.import_paths(paths=[path])
    session = models.Session.objects.get(files__path=str(path.resolve()))
    services.estimate_session_tokens(session_id=session.pk)
    services.analyse_session(session_id=session.pk)
    return models.Session.objects.get(pk=session.pk)


def test_thin_keeps_the_largest_of_each_stretch_in_order():
    points = [(call, (call * 37) % 101) for call in range(1, 1001)]
    kept = glance.thin(points, most=50)
    assert len(kept) == 50 and kept == sorted(kept)
    assert max(points, key=lambda p: p[1])[1] == max(c for _, c in kept)  # the peak is drawn
    assert set(kept) <= set(points)
    assert glance.thin(points[:7], most=50) == points[:7]


def test_sparkline_draws_the_timelines_own_points_and_marks_its_cuts(client_in):
    session = _analysed(MICRO_THEN_COMPACT)
    view = overview_selectors.overview(session=session)
    spark = view["sparkline"]
    timeline = timeline_selectors.timeline(session=session)
    series = {p["call"]: p["context"] for p in timeline["series"][MAIN]}
    assert not spark["estimated"] and spark["calls"] == len(series) == session.api_calls_main
    assert all(series[p["call"]] == p["context"] for p in spark["points"])
    assert max(p["context"] for p in spark["points"]) == spark["largest"] == session.peak_context
    cuts = [
        (e["kind"], e["after_call"])
        for e in timeline["events"]
        if e["agent"] == MAIN and e["kind"] in glance.SPARK_EVENT_KINDS
    ]
    assert [(e["kind"], e["after_call"]) for e in spark["events"]] == cuts
    assert {kind for kind, _ in cuts} == {"compaction", "microcompact"}
    assert (view["compactions"], view["microcompacts"]) == (1, 1)  # the overview counts the same rows
    for e in spark["events"]:
        assert e["url"] == f"/sessions/{session.pk}/timeline/turn/?call={e['after_call']}"
        assert 0 <= e["x"] <= spark["width"]
    # Each point's stretch covers the box from left to right without gaps.
    edges = [(p["from_x"], p["from_x"] + p["width"]) for p in spark["points"]]
    assert edges[0][0] == 0 and edges[-1][1] == pytest.approx(spark["width"])
    assert all(a[1] == pytest.approx(b[0]) for a, b in zip(edges, edges[1:], strict=False))
    # The page draws it and links its points and its cuts to the timeline.
    page = client_in.get(f"/sessions/{session.pk}/").content.decode()
    assert page.count('class="spark-hit"') == len(spark["points"]) and 'class="spark-line"' in page
    assert page.count('class="spark-event mark-') == len(spark["events"])
    assert f'href="/sessions/{session.pk}/timeline/turn/?call={spark["points"][0]["call"]}"' in page


def test_a_log_without_usage_draws_the_timelines_estimates():
    services.import_paths(paths=[KHAELOR_SAMPLES])
    session = models.Session.objects.filter(format="khaelor", api_calls_main__gt=0).first() or (
        models.Session.objects.filter(format="khaelor").first()
    )
    assert session is not None
    if models.ApiCall.objects.filter(session=session, agent=MAIN).exists():
        pytest.skip("this KHAELOR sample records usage")
    # Before the worker's analysis (its estimates, then the composition): computing, not "no calls".
    before = overview_selectors.overview(session=session)["sparkline"]
    assert before["estimated"] and before["computing"] and before["points"] == []
    services.estimate_session_tokens(session_id=session.pk)
    session.refresh_from_db()
    assert overview_selectors.overview(session=session)["sparkline"]["computing"]
    services.analyse_session(session_id=session.pk)
    session.refresh_from_db()
    spark = overview_selectors.overview(session=session)["sparkline"]
    assert not spark["computing"]
    estimates = {p["x"]: p["estimate"] for p in timeline_selectors.timeline(session=session)["estimates"][MAIN]}
    assert spark["estimated"] and spark["points"]
    assert all(estimates[p["call"]] == p["context"] for p in spark["points"])


def test_a_log_without_usage_tells_one_story_of_its_calls_and_its_peak(client_in):
    # The KHAELOR sample records no usage: its 28 replies are its calls. The sparkline said "29 calls" (a point at
    # "call 0", linked to a turn that answers 404) and drew call 23 at 72,891 while the peak said 72,901 at call 23
    # (the largest record anywhere after call 23, where the chart draws each call's own estimate).
    services.import_paths(paths=[KHAELOR_SAMPLES])
    session = models.Session.objects.get(format="khaelor")
    services.estimate_session_tokens(session_id=session.pk)
    services.analyse_session(session_id=session.pk)
    session.refresh_from_db()
    assert session.peak_is_estimate and not models.ApiCall.objects.filter(session=session).exists()
    spark = overview_selectors.overview(session=session)["sparkline"]
    assert spark["calls"] == session.api_calls_main > 0
    assert all(1 <= p["call"] <= session.api_calls_main for p in spark["points"])
    estimates = {p["x"]: p["estimate"] for p in timeline_selectors.timeline(session=session)["estimates"][MAIN]}
    peak = {"call": session.peak_call, "tokens": session.peak_context}
    assert estimates[peak["call"]] == peak["tokens"] == spark["largest"]
    assert peak["tokens"] == max(context for call, context in estimates.items() if call >= 1)
    for point in spark["points"]:
        assert client_in.get(point["url"]).status_code == 200, point


def test_treemap_cells_are_the_composition_at_the_peak_laid_by_area():
    session = _analysed(MICRO_THEN_COMPACT)
    view = overview_selectors.overview(session=session)
    peak, tree = view["peak_composition"], view["treemap"]
    assert tree["call"] == peak["call"] and sum(c["tokens"] for c in tree["cells"]) == peak["context"]
    assert len(tree["cells"]) <= glance.TREEMAP_CELLS
    box = tree["width"] * tree["height"]
    for cell in tree["cells"]:
        assert cell["url"] == f"/sessions/{session.pk}/timeline/turn/?call={peak['call']}"
        assert cell["x"] >= 0 and cell["x"] + cell["width"] <= tree["width"] + 0.01
        assert cell["y"] >= 0 and cell["y"] + cell["height"] <= tree["height"] + 0.01
        area = cell["width"] * cell["height"] / box
        assert area == pytest.approx(cell["tokens"] / peak["context"], abs=0.002)
        assert len(cell["caption"]) <= len(cell["part"]) + 1
    assert [c["tokens"] for c in tree["cells"]] == sorted((c["tokens"] for c in tree["cells"]), reverse=True)


@pytest.mark.parametrize("with_spotter", [True, False], ids=["file-subagents", "inline-subagents"])
def test_subagent_costs_add_up_to_the_session_total_and_are_the_usage_pages(request, client_in, with_spotter):
    session = request.getfixturevalue("spotter") if with_spotter else _analysed(INLINE_SUBAGENTS)
    costs = overview_selectors.overview(session=session)["subagent_costs"]
    data = client_in.get(f"/sessions/{session.pk}.json").json()
    assert data["overview"]["subagent_costs"] == costs
    assert costs["subagents"] == len(costs["rows"]) > 0
    assert {r["kind"] for r in costs["rows"]} == ({"file"} if with_spotter else {"inline"})
    # Subagents and main chain: the session's own total (each row rounded to the micro-dollar).
    assert costs["session_cost_usd"] == session.cost_usd
    assert costs["subagents_cost_usd"] + costs["main_cost_usd"] == pytest.approx(session.cost_usd, abs=1e-5)
    assert costs["subagents_cost_usd"] == pytest.approx(sum(r["cost_usd"] for r in costs["rows"]), abs=1e-6)
    assert [r["cost_usd"] for r in costs["rows"]] == sorted((r["cost_usd"] for r in costs["rows"]), reverse=True)
    # The Usage page's row of this session gives its subagents (files or inline) the same cost and tokens.
    usage = usage_report(query=UsageQuery(by="session", sessions=SessionFilters()))
    [row] = [r for r in usage.rows if r.session == session.pk]
    side = row.subagents if with_spotter else row.inline_subagents
    assert side.cost_usd == pytest.approx(costs["subagents_cost_usd"], abs=1e-5)
    assert side.total_tokens == costs["tokens"] == sum(r["tokens"] for r in costs["rows"])
    # The same rows as the session JSON's subagents and `session_stats --json` (selectors.subagents).
    out = io.StringIO()
    call_command("session_stats", str(session.pk), "--json", stdout=out)
    for twin in (data["subagents"], json.loads(out.getvalue())["subagents"]):
        assert {r["agent"]: (r["calls"], r["tokens"], r["cost_usd"]) for r in twin["rows"]} == {
            r["agent"]: (r["calls"], r["tokens"], r["cost_usd"]) for r in costs["rows"]
        }
        assert twin["cost_usd"] == costs["subagents_cost_usd"]
    # Each row counts its stored calls as the agent list does and links to its transcript.
    calls = {a.agent: a.calls for a in agent_selectors.agents(session=session)}
    for r in costs["rows"]:
        assert r["calls"] == calls[r["agent"]] > 0
        assert r["url"] == f"/sessions/{session.pk}/?agent={r['agent']}"
