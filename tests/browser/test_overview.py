"""The overview at the top of a session page, per agent: its colours, its own lines, the composition at the peak."""

from __future__ import annotations

import re

import pytest

from compaction.strategies.registry import build_strategy
from sessions_app import models, services
from sessions_app.selectors import conversation as conversation_selectors
from sessions_app.selectors import diagnosis as diagnosis_selectors
from sessions_app.selectors import overview as overview_selectors
from tests.browser.conftest import OVERLAPS
from tests.conftest import CLAUDE_SAMPLES, CODEX_SAMPLES, KHAELOR_SAMPLES, KLAUDE_SAMPLES
from tests.helpers.sample_sessions import SPOTTER, SUBAGENT

pytestmark = pytest.mark.browser

SAMPLES = {
    "claude-code": [CLAUDE_SAMPLES / "entirecli_7662d755ef9f-2_full.jsonl"],
    "klaude-code": [KLAUDE_SAMPLES / "dot-klaude"],
    "khaelor": [KHAELOR_SAMPLES],
    "codex": [next(CODEX_SAMPLES.glob("localpush__*remote-compaction*.jsonl"))],
}


def strategy_lines(session: models.Session) -> dict[str, int | None]:
    """The session's own agent's warning and compaction lines, asked of its strategy directly."""
    strategy = build_strategy(session.format, info=conversation_selectors.session_info(session=session), overrides={})
    t = strategy.thresholds(
        model=session.model or None, version=session.agent_version or None, observed_max=session.peak_context
    )
    return {"warning": t.warning, "autocompact": t.autocompact, "window": t.window}


@pytest.mark.parametrize("agent", list(SAMPLES))
def test_overview_in_the_agents_colours_and_lines(page, live_server, agent):
    services.import_paths(paths=SAMPLES[agent])
    session = models.Session.objects.filter(format=agent).order_by("-peak_context").first()
    assert session is not None
    services.estimate_session_tokens(session_id=session.pk)
    services.analyse_session(session_id=session.pk)
    session.refresh_from_db()
    page.goto(f"{live_server.url}/sessions/{session.pk}/")
    overview = page.locator(f"section.overview.agent-{agent}")
    assert overview.count() == 1
    # The gauge's fill is the agent's colour, the one the palette gives it.
    fill, expected = page.evaluate(
        f"""() => {{
        const fill = getComputedStyle(document.querySelector('.overview .gauge-fill')).fill;
        const probe = document.createElement('span');
        probe.style.color = getComputedStyle(document.documentElement).getPropertyValue('--agent-{agent}').trim()
            || getComputedStyle(document.querySelector('.overview')).getPropertyValue('--agent-color').trim();
        document.body.appendChild(probe);
        const want = getComputedStyle(probe).color;
        probe.remove();
        return [fill, want];
    }}"""
    )
    assert fill == expected and fill not in ("none", "rgb(0, 0, 0)")
    lines = strategy_lines(session)
    window = int(page.get_attribute(".overview .gauge-track", "width") or 0)
    assert window == 1000
    for name in ("warning", "autocompact"):
        line = page.locator(f".overview .gauge-line.line-{name}")
        if lines[name] is None:
            assert line.count() == 0
            continue
        assert int(line.get_attribute("data-tokens") or 0) == lines[name]
        x = float(line.get_attribute("x1") or 0)
        assert x == pytest.approx(1000 * min(lines[name] / lines["window"], 1), abs=0.01)
    assert f"{lines['window']:,}-token window" in overview.inner_text()
    # Peak, calls, compactions, duration and cost as tiles; every number of four digits has separators.
    text = overview.inner_text()
    assert f"{session.peak_context:,}" in text
    numbers = " ".join(
        [page.inner_text(".overview .tiles"), page.inner_text(".overview .gauge-legend")]
        + overview.locator("ul.legend .num").all_inner_texts()
    )
    assert not re.search(r"(?<![\d.,$])\d{4,}(?![\d,])", numbers), numbers
    # What cleared tool results: the agent's prunes where it pruned (KHAELOR), else its microcompacts.
    cleared = "Prunes" if overview_selectors.overview(session=session)["prunes"] else "Microcompacts"
    for tile in ("API calls", "Compactions", cleared, "Duration", "Cost"):
        assert tile in text
    # The composition at the peak: a treemap whose cells add up to that call's context, with a legend.
    peak = overview_selectors.overview(session=session)["peak_composition"]
    tokens = overview.locator(".treemap-cell rect").evaluate_all("rs => rs.map(r => Number(r.dataset.tokens))")
    assert sum(tokens) == peak["context"] and len(tokens) == overview.locator(".treemap ul.legend li").count()
    boxes = overview.locator(".treemap ul.legend li").evaluate_all(
        "els => els.map(e => { const r = e.getBoundingClientRect();"
        " return {text: e.innerText, left: r.left, top: r.top, width: r.width, height: r.height}; })"
    )
    assert page.evaluate(OVERLAPS, boxes) == []
    # The verdict in one sentence, linking to the diagnosis.
    verdict = overview.locator(".overview-verdict")
    assert diagnosis_selectors.diagnosis(session=session)["verdict"] in verdict.inner_text()
    assert verdict.locator("a").get_attribute("href") == f"/sessions/{session.pk}/diagnosis/"
    assert page.errors == []


def test_first_glance_sparkline_treemap_and_subagent_costs_link_to_the_timeline(page, live_server):
    """The head of a session with a compaction and subagents: the three render, add up, and open the timeline."""
    services.import_paths(paths=[SPOTTER, SPOTTER.with_suffix("") / "subagents"])
    session = models.Session.objects.get(files__path=str(SPOTTER.resolve()))
    services.estimate_session_tokens(session_id=session.pk)
    services.analyse_session(session_id=session.pk)
    session.refresh_from_db()
    view = overview_selectors.overview(session=session)
    spark, tree, costs = view["sparkline"], view["treemap"], view["subagent_costs"]
    page.goto(f"{live_server.url}/sessions/{session.pk}/")
    overview = page.locator("section.overview")
    # The sparkline: one link per drawn point, the line in the agent's colour, each compaction marked.
    assert overview.locator(".sparkline .spark-hit").count() == len(spark["points"]) > 1
    assert len((overview.locator(".spark-line").get_attribute("points") or "").split()) == len(spark["points"])
    stroke, agent_colour = page.evaluate(
        """() => { const line = document.querySelector('.overview .spark-line');
        return [getComputedStyle(line).stroke,
                getComputedStyle(document.querySelector('.overview .gauge-fill')).fill]; }"""
    )
    assert stroke == agent_colour and stroke not in ("none", "rgb(0, 0, 0)")
    compactions = [e for e in spark["events"] if e["kind"] == "compaction"]
    assert compactions and overview.locator(".spark-event.mark-compaction").count() == len(compactions)
    # The treemap: its cells add up to the peak's context; the subagent panel to the session's cost tile.
    cells = overview.locator(".treemap-cell rect").evaluate_all("rs => rs.map(r => Number(r.dataset.tokens))")
    assert cells == [c["tokens"] for c in tree["cells"]] and sum(cells) == tree["context"]
    panel = overview.locator(".overview-subagents")
    assert panel.locator("tbody tr").count() == costs["subagents"] == 2
    assert panel.locator(".session-total").inner_text() == f"${session.cost_usd:.2f}"
    assert panel.locator(".subagents-total").inner_text() == f"${costs['subagents_cost_usd']:.2f}"
    assert f"${session.cost_usd:.2f}" in overview.locator(".tiles").inner_text()
    assert f"{costs['percent']}% of the session's cost" in panel.inner_text()
    # A compaction mark opens the timeline at that call, with its call panel.
    after = compactions[0]["after_call"]
    overview.locator(".spark-event.mark-compaction").first.click()
    page.wait_for_url(f"**/sessions/{session.pk}/timeline/turn/?call={after}")
    assert page.locator("#turn").count() == 1 and f"{after}" in page.locator("#turn").inner_text()
    # A treemap cell opens the timeline at the peak call.
    page.go_back()
    overview.locator(".treemap-cell").first.click()
    page.wait_for_url(f"**/sessions/{session.pk}/timeline/turn/?call={tree['call']}")
    # A subagent's row opens its transcript.
    page.go_back()
    panel.locator(f"tr[data-agent='{SUBAGENT}'] a").click()
    page.wait_for_url(f"**/sessions/{session.pk}/?agent={SUBAGENT}")
    assert page.errors == []
