"""Open a session with a compaction, see the marker, click a point, see that call's detail and composition."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from sessions_app import models, services
from sessions_app.selectors import agents as agent_selectors
from tests.browser.conftest import OVERLAPS, wait_until
from tests.conftest import CLAUDE_SAMPLES

pytestmark = pytest.mark.browser


def test_timeline_marker_click_and_composition(page, live_server):
    outcome = services.import_file(path=CLAUDE_SAMPLES / "entirecli_a6e4c2a0fbd1-0_full.jsonl")
    services.estimate_session_tokens(session_id=outcome.session)
    page.goto(f"{live_server.url}/sessions/{outcome.session}/")
    page.click("text=Token timeline")
    page.wait_for_url("**/timeline/")
    wait_until(page, "() => document.getElementById('chart')?.uplot !== undefined")
    marker_row = page.locator("tr.marker-compaction")
    assert "155,250 tokens before" in marker_row.inner_text() and "(auto)" in marker_row.inner_text()
    # The chart draws the marker: the canvas pixel on the marker's x is the marker colour.
    drawn = page.evaluate(
        """() => {
        const u = document.getElementById('chart').uplot;
        const data = JSON.parse(document.getElementById('timeline-data').textContent);
        const m = data.events.find(m => m.kind === 'compaction');
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
    # Hover shows the numbers of that call in the tooltip: "call N", tokens with separators.
    wait_until(page, "() => document.querySelector('.chart-tooltip').innerText.includes('49,761 tokens')")
    assert page.inner_text(".chart-tooltip").startswith("call ")
    assert page.locator(".u-legend").count() == 0  # uPlot's own legend ("Value: --") is off
    page.mouse.click(x, y)
    page.wait_for_selector(".turn-detail")
    detail = page.inner_text("#turn")
    assert "Main chain, call" in detail and "49,761" in detail
    assert "compaction summary" in detail  # what filled the context right after the compaction
    # The split as one stacked bar with a legend, its parts adding up to the call's context.
    tokens = page.eval_on_selector_all("#turn svg.stacked-bar rect", "rs => rs.map(r => Number(r.dataset.tokens))")
    assert sum(tokens) == 49761 and page.locator("#turn ul.legend li").count() == len(tokens)
    assert page.errors == []


def test_a_timeline_point_opens_the_layers_waterfall(page, live_server):
    # entirecli_f9f6f611b469 (2.1.20): a real microcompact of 29 results right before the auto compaction.
    outcome = services.import_file(path=CLAUDE_SAMPLES / "entirecli_f9f6f611b469-0_full.jsonl")
    page.goto(f"{live_server.url}/sessions/{outcome.session}/timeline/")
    wait_until(page, "() => document.getElementById('chart')?.uplot !== undefined")
    # Click the first call after the microcompact: the layers that ran before its request.
    x, y = page.evaluate(
        """() => {
        const u = document.getElementById('chart').uplot;
        const data = JSON.parse(document.getElementById('timeline-data').textContent);
        const m = data.events.find(m => m.kind === 'microcompact');
        const p = data.series.main.find(p => p.call === m.after_call + 1);
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


# ----------------------------------------------------------------------------- composition over time, labels, lanes

# A microcompact then an auto compaction (../shared/samples/claude-code/SOURCES.md).
MICRO_THEN_COMPACT = CLAUDE_SAMPLES / "entirecli_7662d755ef9f-2_full.jsonl"


def analysed(path) -> models.Session:
    outcome = services.import_file(path=path)
    assert isinstance(outcome, services.FileImport) and outcome.session is not None
    services.estimate_session_tokens(session_id=outcome.session)
    services.analyse_session(session_id=outcome.session)
    return models.Session.objects.get(pk=outcome.session)


def cli_call(session: models.Session, call: int) -> dict:
    out = io.StringIO()
    call_command("timeline", str(session.pk), "--call", str(call), "--json", stdout=out)
    return json.loads(out.getvalue())


def test_the_stacked_composition_adds_up_to_each_calls_context(page, live_server):
    session = analysed(MICRO_THEN_COMPACT)
    page.goto(f"{live_server.url}/sessions/{session.pk}/timeline/")
    wait_until(page, "() => document.getElementById('chart')?.uplot !== undefined")
    page.check("input[name=chart-mode][value=composition]")
    wait_until(page, "() => document.getElementById('chart').dataset.mode === 'composition'")
    # The chart's own data: cumulative series painted top first; each band is the difference to the one below.
    bands = page.evaluate(
        """() => {
        const u = document.getElementById('chart').uplot, n = u.series.length - 1, out = {};
        u.data[0].forEach((x, i) => {
            const parts = {};
            for (let k = 1; k <= n; k++) {
                const v = u.data[k][i] - (k < n ? u.data[k + 1][i] : 0);
                if (v) parts[u.series[k].label] = v;
            }
            out[x] = {total: u.data[1][i], parts: parts};
        });
        return out;
    }"""
    )
    markers = {m.kind: m.after_call for m in models.ContextEvent.objects.filter(session=session)}
    calls = [1, markers["microcompact"], markers["microcompact"] + 1, markers["compaction"] + 1, session.api_calls_main]
    for call in calls:
        cli = cli_call(session, call)
        assert bands[str(call)]["total"] == cli["context"], call
        assert bands[str(call)]["parts"] == {p["part"]: p["tokens"] for p in cli["composition"]}, call
    assert "compaction summary" in bands[str(markers["compaction"] + 1)]["parts"]
    legend = page.inner_text("#series-legend")
    assert "tool results: Read" in legend and "system prompt and tools (inferred)" in legend
    assert page.locator(".u-legend").count() == 0
    assert page.evaluate(OVERLAPS, page.evaluate("() => document.getElementById('chart').labelBoxes")) == []
    assert page.errors == []


@pytest.mark.parametrize("width", [1440, 390])
def test_chart_labels_do_not_overlap_and_the_y_axis_fits_its_labels(page, live_server, width):
    session = analysed(MICRO_THEN_COMPACT)
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{live_server.url}/sessions/{session.pk}/timeline/")
    wait_until(page, "() => document.getElementById('chart')?.uplot !== undefined")
    for mode in ("context", "composition"):
        page.check(f"input[name=chart-mode][value={mode}]")
        wait_until(page, f"() => document.getElementById('chart').dataset.mode === '{mode}'")
        boxes = page.evaluate("() => document.getElementById('chart').labelBoxes")
        assert any("window" in b["text"] for b in boxes)
        assert page.evaluate(OVERLAPS, boxes) == [], mode
        # Every label inside the plot's width, every tick label of the y axis inside the axis.
        fit = page.evaluate(
            """() => {
            const u = document.getElementById('chart').uplot, ctx = u.ctx, axis = u.axes[1];
            ctx.save(); ctx.font = axis.font[0];
            const widest = Math.max(...axis._values.map(v => ctx.measureText(v).width)) / devicePixelRatio;
            ctx.restore();
            return {widest: widest, room: u.bbox.left / devicePixelRatio, values: axis._values,
                    right: (u.bbox.left + u.bbox.width) / devicePixelRatio};
        }"""
        )
        assert fit["widest"] < fit["room"], fit
        assert all("," in v for v in fit["values"] if len(v.replace(",", "")) >= 4), fit["values"]
        assert all(b["left"] >= 0 and b["left"] + b["width"] <= fit["right"] + 1 for b in boxes), boxes
    assert page.errors == []


# The lines the chart draws (static/timeline.js LINES); effective_window is the window less the output reserve, a step
# in computing these, not a line where anything happens, so it is not drawn.
THRESHOLD_LINES = ("window", "blocking", "autocompact", "warning")
LABEL_ROW = 16  # css px: one row of chart labels (14 px of text and 2 px between rows)


@pytest.mark.parametrize("width", [1440, 390])
def test_every_threshold_line_has_its_label_beside_it(page, live_server, width):
    session = analysed(MICRO_THEN_COMPACT)
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{live_server.url}/sessions/{session.pk}/timeline/")
    wait_until(page, "() => document.getElementById('chart')?.uplot !== undefined")
    for mode in ("context", "composition"):
        page.check(f"input[name=chart-mode][value={mode}]")
        wait_until(page, f"() => document.getElementById('chart').dataset.mode === '{mode}'")
        # Each line's pixel y from the chart's own scale, not from what the overlay code reports.
        drawn = page.evaluate(
            """(names) => {
            const el = document.getElementById('chart'), u = el.uplot, t = el.timeline.thresholds;
            const lines = names.filter(n => t[n] && t[n] >= u.scales.y.min && t[n] <= u.scales.y.max)
                .map(n => ({name: n, value: t[n], y: u.valToPos(t[n], 'y', true) / devicePixelRatio}));
            return {lines: lines, boxes: el.labelBoxes};
        }""",
            list(THRESHOLD_LINES),
        )
        names = [line["name"] for line in drawn["lines"]]
        assert {"window", "blocking", "autocompact", "warning"} <= set(names), names
        for line in drawn["lines"]:
            value = f"{line['value']:,} tokens"
            mine = [b for b in drawn["boxes"] if line["name"] in b["text"] and value in b["text"]]
            assert len(mine) == 1, (mode, line, drawn["boxes"])
            [box] = mine
            centre = box["top"] + box["height"] / 2
            assert abs(centre - line["y"]) <= LABEL_ROW, (mode, line, box)
            # Never across another line (unless it shares the value and so the label).
            others = [o["y"] for o in drawn["lines"] if o["value"] != line["value"]]
            assert not [y for y in others if box["top"] < y < box["top"] + box["height"]], (mode, line, box, others)
        assert page.evaluate(OVERLAPS, drawn["boxes"]) == [], mode
        # The compaction and the microcompact are named too, however narrow the chart.
        texts = [b["text"] for b in drawn["boxes"]]
        assert any(t.startswith("▼ compaction") for t in texts) and any("microcompact" in t for t in texts), texts
    assert page.errors == []


def test_a_legend_toggle_hides_a_marker_kind(page, live_server):
    session = analysed(MICRO_THEN_COMPACT)
    page.goto(f"{live_server.url}/sessions/{session.pk}/timeline/")
    wait_until(page, "() => document.getElementById('chart')?.uplot !== undefined")
    pixel = """() => {
        const u = document.getElementById('chart').uplot, el = document.getElementById('chart');
        const m = el.timeline.events.find(m => m.kind === 'compaction');
        const x = Math.round(u.valToPos(m.x, 'x', true)), y = Math.round(u.bbox.top + u.bbox.height * 0.75);
        const px = u.ctx.getImageData(x, y, 1, 1).data;
        return [px[0], px[1], px[2]];
    }"""
    texts = "() => document.getElementById('chart').labelBoxes.map(b => b.text)"
    shown = page.evaluate(pixel)
    assert shown[0] > 180 and shown[2] < 100  # the compaction line's colour
    assert any("compaction" in t and "microcompact" not in t for t in page.evaluate(texts))
    page.uncheck("#marker-legend input[data-kind=compaction]")
    hidden = page.evaluate(pixel)
    assert hidden != shown and not (hidden[0] > 180 and hidden[2] < 100)
    assert not any("compaction" in t and "microcompact" not in t for t in page.evaluate(texts))
    assert any("microcompact" in t for t in page.evaluate(texts))  # the other kinds stay
    # Each kind has its own dash in the legend, not only its colour.
    dashes = page.eval_on_selector_all(
        "#marker-legend .mark-sample",
        "els => els.map(e => getComputedStyle(e).borderTopStyle + getComputedStyle(e).borderTopWidth)",
    )
    kinds = page.eval_on_selector_all("#marker-legend input[data-kind]", "els => els.map(e => e.dataset.kind)")
    styles = dict(zip(kinds, dashes, strict=True))
    wanted = ["compaction", "microcompact", "overflow", "subagent_spawn", "idle_gap", "cache_miss"]
    assert len({styles[k] for k in wanted}) == len(wanted), styles
    # The events table names a kind in words, as the legend does ("cache miss", not the identifier "cache_miss").
    names = page.eval_on_selector_all("tr.marker td:first-child a", "as => as.map(a => a.textContent)")
    assert "cache miss" in names and not [n for n in names if "_" in n], names
    assert page.errors == []


def test_subagent_lanes_start_at_their_spawn_call(page, live_server):
    from tests.helpers.sample_sessions import SPOTTER, SUBAGENT

    services.import_paths(paths=[SPOTTER, SPOTTER.with_suffix("") / "subagents" / f"agent-{SUBAGENT}.jsonl"])
    spotter = models.Session.objects.get(files__path=str(SPOTTER.resolve()))
    [spawn] = [s for s in agent_selectors.subagent_spawns(session=spotter).values() if s.agent == SUBAGENT]
    page.goto(f"{live_server.url}/sessions/{spotter.pk}/timeline/")
    wait_until(page, "() => document.getElementById('chart')?.uplot !== undefined")
    page.check("#own-lanes")
    wait_until(page, f"() => !!document.querySelector('#lanes .lane[data-lane=\"{SUBAGENT}\"]')")
    start = page.evaluate(
        f"""() => {{
        const u = document.querySelector('#lanes .lane[data-lane="{SUBAGENT}"]').uplot;
        const s = u.series.findIndex(s => s.label === '{SUBAGENT} context');
        return u.data[0][u.data[s].findIndex(v => v != null)];
    }}"""
    )
    assert start == spawn.call
    # The main chart now holds the main chain only, on the same call axis as the lane.
    labels = page.evaluate("() => document.getElementById('chart').uplot.series.map(s => s.label)")
    assert f"{SUBAGENT} context" not in labels and "main chain context" in labels
    same_axis = page.evaluate(
        f"""() => {{
        const main = document.getElementById('chart').uplot;
        const lane = document.querySelector('#lanes .lane[data-lane="{SUBAGENT}"]').uplot;
        return [main.scales.x.min, main.scales.x.max, lane.scales.x.min, lane.scales.x.max];
    }}"""
    )
    assert same_axis[:2] == same_axis[2:]
    assert page.errors == []


def test_a_clicked_call_is_in_the_address_and_the_form_keeps_it(page, live_server):
    # Clicking a point filled the call panel without changing the address (a reload lost it); and on the page a call
    # link opens (/timeline/turn/?call=N) the form went to the turn URL without its call: a 404.
    outcome = services.import_file(path=CLAUDE_SAMPLES / "entirecli_a6e4c2a0fbd1-0_full.jsonl")
    page.goto(f"{live_server.url}/sessions/{outcome.session}/timeline/?strategy=codex")
    wait_until(page, "() => document.getElementById('chart')?.uplot !== undefined")
    x, y, call = page.evaluate(
        """() => {
        const u = document.getElementById('chart').uplot;
        const data = JSON.parse(document.getElementById('timeline-data').textContent);
        const p = data.series.main[3];
        const r = u.over.getBoundingClientRect();
        return [r.left + u.valToPos(p.x, 'x'), r.top + u.valToPos(p.context, 'y'), p.call];
    }"""
    )
    page.mouse.move(x, y)
    page.mouse.click(x, y)
    page.wait_for_selector(f"#turn-main-{call}")
    wait_until(page, f"location.search.includes('call={call}')")
    assert "/timeline/turn/" in page.url and "strategy=codex" in page.url and "agent=main" in page.url
    page.reload()
    assert page.locator(f"#turn-main-{call}").count() == 1
    assert page.input_value("select[name=strategy]") == "codex"
    page.select_option("select[name=strategy]", "claude-code")
    with page.expect_navigation() as navigation:
        page.click("#timeline-form button[type=submit] >> text=Show")
    assert navigation.value.status == 200
    assert page.locator(f"#turn-main-{call}").count() == 1 and "strategy=claude-code" in page.url
    # Back over a clicked call: htmx restores the page from its cache, where the chart is drawn again.
    page.goto(f"{live_server.url}/sessions/{outcome.session}/timeline/")
    wait_until(page, "() => document.getElementById('chart')?.uplot !== undefined")
    page.mouse.move(x, y)
    page.mouse.click(x, y)
    wait_until(page, f"location.search.includes('call={call}')")
    page.go_back()
    wait_until(page, f"!location.search.includes('call=') && !document.getElementById('turn-main-{call}')")
    wait_until(page, "(document.getElementById('chart').uplot?.data[0].length || 0) > 3")
    assert page.locator("#chart canvas").count() > 0
    assert page.errors == []
