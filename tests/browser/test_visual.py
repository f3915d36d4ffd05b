"""Every page, on a phone and on a wide screen, in both themes: nothing wider than the viewport outside the boxes
that scroll, every count of four or more digits with thousands separators, and no serious or critical axe-core
violation.

Pages are filled from real samples (../shared/samples): a Claude Code session with compactions, a klaude-code
session that overflowed, the KHAELOR event log and a Codex rollout, plus an offline compaction run so the run,
compare and reviews pages have something to show.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from sessions_app import models, run_services, services, simulations
from sessions_app.models import CompactionRun
from sessions_app.selectors import previews as preview_selectors
from sessions_app.selectors import simulations as simulation_selectors
from tests.conftest import CLAUDE_SAMPLES, CODEX_SAMPLES, KHAELOR_SAMPLES, KLAUDE_SAMPLES
from tests.helpers.claude_code_lines import assistant, user

pytestmark = pytest.mark.browser

AXE = Path(__file__).resolve().parent / "node_modules" / "axe-core" / "axe.min.js"
CLAUDE = CLAUDE_SAMPLES / "entirecli_a6e4c2a0fbd1-0_full.jsonl"
KLAUDE = KLAUDE_SAMPLES / "dot-klaude/projects/home-dev-projects-webapp/sessions/e403978267e543c9ae7335a01662e2ce"
KHAELOR = KHAELOR_SAMPLES / "ledger-migration.events.jsonl"
CODEX = CODEX_SAMPLES / "localpush__0.104.0-alpha.1__rollout-2026-02-23T12-40-23-019c8a4c.jsonl"
VIEWPORTS = {"desktop": {"width": 1440, "height": 900}, "phone": {"width": 390, "height": 844}}

# Elements wider than the viewport, skipping what sits inside a box that scrolls sideways (tables wrapped in
# .table-scroll, code blocks): there the overflow scrolls that box, not the page.
WIDE_ELEMENTS = """() => {
  const width = document.documentElement.clientWidth;
  const scrolls = (el) => {
    for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
      const x = getComputedStyle(p).overflowX;
      if (x === "auto" || x === "scroll") return true;
    }
    return false;
  };
  const wide = [];
  for (const el of document.body.querySelectorAll("*")) {
    const box = el.getBoundingClientRect();
    if (box.width === 0 || box.height === 0) continue;
    // scrollWidth counts text that runs out of its own box (a long word that cannot wrap).
    const own = getComputedStyle(el).overflowX;
    const right = own === "auto" || own === "scroll" ? box.right : Math.max(box.right, box.left + el.scrollWidth);
    if ((right > width + 1 || box.left < -1) && !scrolls(el)) {
      const name = `${el.tagName.toLowerCase()}.${[...el.classList].join(".")}#${el.id}`;
      wide.push(`${name} ${Math.round(box.left)}..${Math.round(right)}`);
    }
  }
  return {wide: wide.slice(0, 8), pageWidth: document.documentElement.scrollWidth, width};
}"""

# Visible text with a run of four or more digits that is a count or a quantity. Left out, on purpose:
# - text the product quotes rather than writes: transcript content (pre, code, .md, .block-body, .snippet, the
#   prompt and description of a subagent call, summary items, session titles and project names, which come from
#   the transcript: .quoted), form fields and their options (model names like claude-sonnet-4-5-20250929);
# - identifiers and positions written as references: "#123" record links, "line 123" and "path:123";
# - digits that belong to a larger token (dates 2026-02-23, times, versions, hashes, ids like 019c8a4c): the
#   lookarounds skip a digit run touching a letter, digit, "_", "-", "/", ":" or a decimal point.
UNSEPARATED = r"""() => {
  const skip = "pre, code, script, style, textarea, select, option, "
    + ".md, .block-body, .snippet, .prompt, .description, .quoted, ol.items";
  const pattern = /(?<![\w#/:.\-])\d{4,}(?![\w/:\-]|\.\d)/g;
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const found = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const el = node.parentElement;
    if (!el || el.closest(skip) || !el.checkVisibility()) continue;
    const text = node.textContent.replace(/\bline \d+/g, "");
    for (const m of text.matchAll(pattern)) found.push(`${m[0]} in "${text.trim().slice(0, 80)}"`);
  }
  return found.slice(0, 10);
}"""

# The what-if form and the page's own text around it: no Python literal (None, True, False) as a field's value, an
# option or visible text (what the product writes: transcript quotes are skipped as above), and every field holding a
# number is a number field (issue 33: typed fields, proper labels).
WHAT_IF_LITERALS = r"""() => {
  const form = document.querySelector("details.replay-form");
  if (!form || !form.open) return ["no open what-if form"];
  const literal = /\b(?:None|True|False)\b/;
  const found = [];
  for (const el of form.querySelectorAll("input, option")) {
    const shown = el.tagName === "OPTION" ? el.textContent : "";
    if (literal.test(el.value) || literal.test(shown)) found.push(`${el.tagName.toLowerCase()} ${el.value} ${shown}`);
  }
  for (const input of form.querySelectorAll("input:not([type=checkbox]):not([type=radio])")) {
    if (input.value !== "" && !Number.isNaN(Number(input.value)) && input.type !== "number") {
      found.push(`untyped ${input.name}=${input.value}`);
    }
  }
  const skip = "pre, code, script, style, textarea, select, option, "
    + ".md, .block-body, .snippet, .prompt, .description, .quoted, ol.items";
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const el = node.parentElement;
    if (!el || el.closest(skip) || !el.checkVisibility()) continue;
    if (literal.test(node.textContent)) found.push(`text "${node.textContent.trim().slice(0, 80)}"`);
  }
  return found.slice(0, 10);
}"""


@dataclass
class Samples:
    claude: models.Session
    klaude: models.Session
    khaelor: models.Session
    codex: models.Session
    run: CompactionRun
    upload: int
    simulation: int
    lab: str


@pytest.fixture
def samples(transactional_db, settings, tmp_path) -> Samples:
    settings.ANTHROPIC_API_KEY = ""  # the offline summarizer: the run finishes here, without a worker
    sessions = []
    for path in (CLAUDE, KLAUDE / "events.jsonl", KHAELOR, CODEX):
        outcome = services.import_file(path=path)
        assert isinstance(outcome, services.FileImport) and outcome.session is not None, outcome
        sessions.append(models.Session.objects.get(pk=outcome.session))
    claude, klaude, khaelor, codex = sessions
    # The session page's first glance whole: its treemap is the worker's composition at the peak.
    services.estimate_session_tokens(session_id=claude.pk)
    services.analyse_session(session_id=claude.pk)
    preview = preview_selectors.build_preview(session=claude, strategy="claude-code", overrides={})
    assert preview.runnable, preview.error or preview.refused
    run = run_services.run_now(preview=preview, user=None)
    # A lab of two variants at one point, run here (offline).
    lab = run_services.start_lab(
        session=claude, strategy="claude-code", points=[5], variants=["Keep every path.", ""], user=None
    )
    for queued in models.CompactionRun.objects.filter(lab=lab):
        run_services.execute_run(run_id=queued.pk)
    # An import still running, with counts large enough to need separators.
    upload = models.UploadImport.objects.create(
        names="projects.zip", status="running", files_total=12_034, files_done=1_234, sessions_found=1_100
    )
    # A settings simulation over the four sessions, two settings tried (done inline, as manage.py simulate runs it).
    plan = simulation_selectors.plan(
        strategy="claude-code", params={}, try_name="pct_override", try_values=["60", "90"]
    )
    simulation = simulations.simulate(run_id=simulations.create(plan=plan, filters={}).pk)
    assert simulation.status == "done", simulation.error
    return Samples(
        claude=claude,
        klaude=klaude,
        khaelor=khaelor,
        codex=codex,
        run=run,
        upload=upload.pk,
        simulation=simulation.pk,
        lab=lab,
    )


def pages(samples: Samples) -> dict[str, str]:
    """Every page a reader reaches, by name: path."""
    c, run = samples.claude, samples.run
    urls = {
        "session list": "/",
        "import": "/import/",
        "reviews": "/reviews/",
        "run": f"/runs/{run.pk}/",
        "compare": f"/runs/{run.pk}/compare/",
        "preview": f"/sessions/{c.pk}/preview/",
        "instructions lab": f"/sessions/{c.pk}/lab/",
        "lab": f"/labs/{samples.lab}/",
        "usage": "/usage/",
        "usage by session": "/usage/?by=session&stack=agent",
        "findings": "/findings/?by=agent",
    }
    # The call panel at the peak call (layers, composition), and the timeline with two what-if replays.
    peak = models.ApiCall.objects.filter(session=c, agent="main").order_by("-context").first()
    assert peak is not None
    urls["call panel"] = f"/sessions/{c.pk}/timeline/turn/?agent=main&call={peak.number}"
    # Every agent's strategy, one of them modelling every compaction (its follow switch off).
    urls["replays"] = (
        f"/sessions/{c.pk}/timeline/?replay=claude-code&replay=klaude-code&replay=codex&replay=khaelor"
        "&claude-code.follow=0"
    )
    for name, s in (("claude", c), ("klaude", samples.klaude), ("khaelor", samples.khaelor), ("codex", samples.codex)):
        urls[f"{name} session"] = f"/sessions/{s.pk}/"
        urls[f"{name} timeline"] = f"/sessions/{s.pk}/timeline/"
        urls[f"{name} diagnosis"] = f"/sessions/{s.pk}/diagnosis/"
        urls[f"{name} thresholds help"] = f"/help/thresholds/{s.format}/"
    urls["upload progress"] = f"/imports/{samples.upload}/"
    # The simulator's form is the what-if form's fields and the list's filters, checked on their own pages.
    urls["simulation"] = f"/simulations/{samples.simulation}/"
    return urls


# The page has settled: loaded, and no htmx request, swap or settle for 100 ms (the pages' own requests are all htmx;
# the timeline's chart data is embedded). Playwright's "networkidle" waits 500 ms of silence on every page instead:
# about a minute over this module's page loads on a 2-core CI.
SETTLED = """() => {
  const busy = document.readyState !== "complete"
    || document.querySelector(".htmx-request, .htmx-swapping, .htmx-settling, .htmx-added");
  const now = performance.now();
  if (busy) { window.__quietSince = null; return false; }
  window.__quietSince = window.__quietSince || now;
  return now - window.__quietSince >= 100;
}"""


def open_page(page, url: str) -> None:
    response = page.goto(url)
    assert response is not None and response.status == 200, (url, response and response.status)
    page.wait_for_function(SETTLED, polling=25)


@pytest.mark.parametrize("viewport", list(VIEWPORTS))
def test_every_page_fits_the_screen_and_separates_thousands(page, live_server, samples, viewport):
    page.set_viewport_size(VIEWPORTS[viewport])
    problems = {}
    for name, path in pages(samples).items():
        open_page(page, live_server.url + path)
        fit = page.evaluate(WIDE_ELEMENTS)
        numbers = page.evaluate(UNSEPARATED)
        literals = page.evaluate(WHAT_IF_LITERALS) if name == "replays" else []
        if fit["wide"] or fit["pageWidth"] > fit["width"] or numbers or literals:
            problems[name] = {
                "wide": fit["wide"],
                "page width": fit["pageWidth"],
                "numbers": numbers,
                "literals": literals,
            }
    assert not problems, json.dumps(problems, indent=1)
    assert page.errors == []


def test_the_checks_catch_a_wide_element_and_a_bare_number(page, live_server, tmp_path):
    """The two checks above can fail: a 5-digit count and a long unbreakable word in a title are both caught."""
    path = tmp_path / "wide.jsonl"
    path.write_text(user("u1", None, "hello") + assistant("a1", "u1", "msg_1", "hi", ctx=12345))
    services.import_paths(paths=[path])
    session = models.Session.objects.get()
    page.set_viewport_size(VIEWPORTS["phone"])
    open_page(page, f"{live_server.url}/sessions/{session.pk}/")
    page.evaluate(
        """() => { const p = document.createElement("p"); p.textContent = "12345 tokens " + "x".repeat(400);
        p.style.whiteSpace = "nowrap"; document.querySelector("main").append(p); }"""
    )
    assert page.evaluate(UNSEPARATED) != []
    fit = page.evaluate(WIDE_ELEMENTS)
    assert any(w.startswith("p.") for w in fit["wide"]) and fit["pageWidth"] > fit["width"]
    # The what-if check catches a Python literal as text and a number in an untyped field.
    page.evaluate(
        """() => { const d = document.createElement("details"); d.className = "replay-form"; d.open = true;
        d.innerHTML = '<label>window <input name="w" value="200000"></label> <span>follow: True</span>';
        document.querySelector("main").append(d); }"""
    )
    caught = page.evaluate(WHAT_IF_LITERALS)
    assert "untyped w=200000" in caught and any("True" in c for c in caught)


def serious_violations(page, *, contrast: bool = True) -> list[str]:
    """axe-core's serious and critical violations on the page as it stands (``contrast=False``: every rule but the
    colour contrast, which is about three quarters of axe's time on a transcript page)."""
    page.add_script_tag(path=str(AXE))
    rules = "" if contrast else ", rules: {'color-contrast': {enabled: false}}"
    options = "{resultTypes: ['violations']" + rules + "}"
    result = page.evaluate(f"async () => (await axe.run(document, {options})).violations")
    return [
        f"{v['id']} ({v['impact']}): {[n['target'] for n in v['nodes'][:3]]} "
        + v["nodes"][0].get("failureSummary", "")[:200]
        for v in result
        if v["impact"] in ("serious", "critical")
    ]


@pytest.mark.parametrize(("scheme", "viewport"), [("light", "desktop"), ("dark", "desktop"), ("dark", "phone")])
def test_no_serious_accessibility_violations(browser, live_server, samples, django_user_model, scheme, viewport):
    """Every rule in both themes at desktop width; on a phone, every rule but the colour contrast: static/app.css's
    narrow-screen rules only rearrange the same elements (no element appears only there, no colour changes), so
    the dark theme's contrast is the desktop run's."""
    from tests.browser.conftest import PASSWORD

    assert AXE.exists(), "axe-core is missing: npm ci --prefix tests/browser (bin/test does it)"
    django_user_model.objects.create_user(username="axe", password=PASSWORD)
    # axe is injected as an inline script, which the app's CSP rightly forbids: this context alone bypasses it.
    context = browser.new_context(viewport=VIEWPORTS[viewport], bypass_csp=True, color_scheme=scheme)
    page = context.new_page()
    found = {}
    open_page(page, f"{live_server.url}/login/")
    # The theme really is the one asked for: the page's background follows prefers-color-scheme.
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert (background == "rgb(14, 20, 27)") == (scheme == "dark"), background
    if bad := serious_violations(page):
        found["login"] = bad
    page.fill("input[name=username]", "axe")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    for name, path in pages(samples).items():
        open_page(page, live_server.url + path)
        if bad := serious_violations(page, contrast=viewport == "desktop"):
            found[name] = bad
    context.close()
    assert not found, json.dumps(found, indent=1)


@pytest.mark.parametrize("viewport", list(VIEWPORTS))
def test_the_fixes_issue_14_names(page, live_server, samples, viewport):
    """Peak bars coloured by how full the window got, verdicts as badges (not whole rows), the search box on its own
    line above the filters, numbers right-aligned in tabular figures."""
    page.set_viewport_size(VIEWPORTS[viewport])
    near = models.Session.objects.create(
        format="khaelor", external_id="near-the-window", peak_context=195_326, context_window=200_000
    )
    low = models.Session.objects.create(
        format="khaelor", external_id="far-below", peak_context=20_000, context_window=200_000
    )
    open_page(page, f"{live_server.url}/?agent=khaelor")
    bar = page.locator(f"tr:has(a[href='/sessions/{near.pk}/']) td.peak meter")
    assert bar.get_attribute("class") == "level-danger"
    assert page.locator(f"tr:has(a[href='/sessions/{low.pk}/']) td.peak meter").get_attribute("class") == "level-ok"
    assert "195,326 / 200,000" in page.inner_text(f"tr:has(a[href='/sessions/{near.pk}/']) td.peak")
    calls = page.locator("table.sessions td.num").first
    assert calls.evaluate("e => [getComputedStyle(e).textAlign, getComputedStyle(e).fontVariantNumeric]") == [
        "right",
        "tabular-nums",
    ]
    search = page.locator("form.filters input[name=q]").bounding_box()
    assert search is not None
    for control in page.locator("form.filters select, form.filters label").all():
        box = control.bounding_box()
        assert box is not None and box["y"] >= search["y"] + search["height"], "a filter sits beside or over the search"

    open_page(page, f"{live_server.url}/reviews/")
    row = page.locator(f"#pending tr[data-run='{samples.run.pk}']")
    transparent = "rgba(0, 0, 0, 0)"
    assert row.evaluate("e => getComputedStyle(e).backgroundColor") == transparent
    badge = row.locator("span.review")
    assert badge.inner_text().endswith("pending")
    assert badge.evaluate("e => getComputedStyle(e).backgroundColor") != transparent
