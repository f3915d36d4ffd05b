"""Findings and compactions across the archive: the page, its JSON twin and the commands give the same numbers, the
per-session diagnosis shows the same findings the archive adds up, the queries do not grow with the archive, and
the shared samples' real compactions are the ones counted by hand from their SOURCES.md."""

from __future__ import annotations

import io
import json

import orjson
import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from genai_prices import Usage as PackageUsage
from genai_prices import calc_price

from sessions_app import models, services
from sessions_app.selectors.calls import session_stats
from sessions_app.selectors.compactions import compactions_report
from sessions_app.selectors.diagnosis import compute_diagnosis
from sessions_app.selectors.findings import findings_report
from sessions_app.selectors.sessions import SessionFilters
from tests.conftest import CLAUDE_SAMPLES, CODEX_SAMPLES, KHAELOR_SAMPLES
from tests.helpers.sample_sessions import SPOTTER

AUTO = CLAUDE_SAMPLES / "entirecli_a6e4c2a0fbd1-0_full.jsonl"  # SOURCES.md: 1× compact_boundary (auto 155250)
REMOTE = next(CODEX_SAMPLES.glob("localpush__*remote-compaction*.jsonl"))  # one remote compaction
SUMMARISER = SPOTTER.with_suffix("") / "subagents" / "agent-acompact-946d2b.jsonl"  # spotter's compaction call


@pytest.fixture
def archive(db) -> list[models.Session]:
    services.import_paths(paths=[AUTO, SPOTTER, SUMMARISER, REMOTE])
    sessions = list(models.Session.objects.order_by("pk"))
    for session in sessions:
        # What the worker's analysis stores (services.analyse_session), without the token estimates and the
        # composition it also computes, which the findings do not read.
        services.store_findings(session=session, report=compute_diagnosis(session=session))
    return sessions


def _of(path) -> models.Session:  # type: ignore[no-untyped-def]
    return models.Session.objects.get(files__path=str(path.resolve()))


def _command(*args: str) -> dict:
    out = io.StringIO()
    call_command(*args, "--json", stdout=out)
    return json.loads(out.getvalue())


def test_page_json_commands_and_diagnosis_give_the_same_findings_and_compactions(client_in, archive) -> None:
    twin = client_in.get("/findings.json").json()
    assert twin["sessions"] == 3
    assert {k: v for k, v in twin.items() if k != "compactions"} == _command("findings")
    assert twin["compactions"] == _command("compactions")
    assert twin["groups"], "the samples have findings"
    costs = [g["cost_usd"] for g in twin["groups"]]
    assert costs == sorted(costs, reverse=True)  # ranked by money
    page = client_in.get("/findings/").content.decode()
    assert f'id="findings-total-cost">${twin["totals"]["cost_usd"]:.2f}' in page
    assert f'id="compactions-total">{twin["compactions"]["totals"]["compactions"]}<' in page
    # The filters are the session list's: one agent's sessions only, on every path.
    codex = client_in.get("/findings.json?agent=codex").json()
    assert {k: v for k, v in codex.items() if k != "compactions"} == _command("findings", "--agent", "codex")
    assert codex["sessions"] == 1 and all(s["agent"] == "codex" for g in codex["groups"] for s in g["top"])
    assert client_in.get("/findings.json?by=day").status_code == 400
    # A replayed saving links its "Try it", as the diagnosis does: the what-if replay with the cap.
    [read] = [g for g in twin["groups"] if (g["kind"], g["subject"]) == ("tool_outputs", "Read")]
    [share] = [s for s in read["top"] if s["session"] == _of(AUTO).pk]
    assert share["try_url"] and "cap_tool=Read" in share["try_url"] and share["proof"]["cap_chars"] == 10_000
    assert share["try_url"].replace("&", "&amp;") in page
    # The per-session diagnosis serves the very findings the archive adds up.
    session = _of(AUTO)
    report = client_in.get(f"/sessions/{session.pk}/diagnosis.json").json()
    served = [{k: v for k, v in r.items() if k != "try_url"} for r in report["recommendations"]]
    stored = [row.data for row in models.SessionFinding.objects.filter(session=session).order_by("rank")]
    assert served == orjson.loads(orjson.dumps(stored))
    twin = client_in.get("/findings.json?kind=cache_misses").json()
    [expiry] = [g for g in twin["groups"] if g["subject"] == "expiry"]
    [share] = [s for s in expiry["top"] if s["session"] == session.pk]
    [finding] = [r for r in served if r["kind"] == "cache_misses" and r["subject"] == "expiry"]
    assert (share["cost_usd"], share["calls"]) == (finding["cost_usd"], finding["calls"][:5])


def test_the_samples_real_compactions_are_those_counted_by_hand_in_queries_that_do_not_grow(archive) -> None:
    report = compactions_report(filters=SessionFilters(), by="agent")
    rows = {(r.session_id, r.after_call): r for r in report.rows}
    assert len(rows) == 3  # SOURCES.md: 1 (entirecli_a6e4, auto), 1 (spotter, manual), 1 (localpush, remote)
    [auto] = [r for r in report.rows if r.session_id == _of(AUTO).pk]
    # docs/formats/claude-code.md §7: preTokens 155,250 against the last recorded context 154,992 (call 6).
    assert (auto.trigger, auto.after_call, auto.context_before) == ("auto", 6, 154_992)
    assert auto.context_after is not None and auto.context_after < 154_992  # the context fell
    assert auto.calls_until_next == _of(AUTO).api_calls_main - 6  # no later compaction: until the last call
    [manual] = [r for r in report.rows if r.session_id == _of(SPOTTER).pk]
    assert (manual.trigger, manual.context_before) == ("manual", 141_787)  # SOURCES.md: max context 141,787
    # Its summariser's call, read from agent-acompact-946d2b.jsonl and priced by the price package directly.
    last = json.loads(SUMMARISER.read_text().splitlines()[-1])
    usage = last["message"]["usage"]
    expected = calc_price(
        PackageUsage(
            input_tokens=usage["input_tokens"]
            + usage["cache_creation_input_tokens"]
            + usage["cache_read_input_tokens"],
            cache_write_tokens=usage["cache_creation_input_tokens"],
            cache_read_tokens=usage["cache_read_input_tokens"],
            output_tokens=usage["output_tokens"],
        ),
        model_ref=last["message"]["model"],
        provider_id="anthropic",
    ).total_price
    assert manual.cost_usd == pytest.approx(float(expected), abs=1e-6)
    assert manual.duration_seconds is not None and 0 < manual.duration_seconds < 600
    assert manual.break_even_calls is not None and manual.cost_usd is not None
    assert manual.bought_usd is not None and manual.bought_usd > manual.cost_usd
    [remote] = [r for r in report.rows if r.session_id == _of(REMOTE).pk]
    assert remote.trigger == "remote" and remote.cost_usd is None  # Codex records no summariser call
    assert {g.group: g.compactions for g in report.groups} == {"claude-code": 2, "codex": 1}
    # Each row's point and contexts are those session_stats lists for the session (one definition, README "Call
    # numbers": context_before is call N's recorded context, context_after call N+1's).
    for session in archive:
        listed = [e for e in session_stats(session=session).events if e.kind == "compaction" and e.agent == "main"]
        mine = [r for r in report.rows if r.session_id == session.pk]
        assert [(e.after_call, e.context_before, e.context_after) for e in listed] == [
            (r.after_call, r.context_before, r.context_after) for r in mine
        ]

    # The queries do not grow with the archive.
    def count() -> int:
        with CaptureQueriesContext(connection) as queries:
            findings_report(filters=SessionFilters()).as_json()
            compactions_report(filters=SessionFilters()).as_json()
        return len(queries)

    # The ranking reads the findings alone: the model's ordering joined the sessions to sort every finding by date
    # (0.45 s of the page's 0.5 s at 20,000 findings, bench/findings_bench.py).
    with CaptureQueriesContext(connection) as queries:
        findings_report(filters=SessionFilters())
    [ranking] = [q["sql"] for q in queries.captured_queries if "ROW_NUMBER" in q["sql"]]
    assert " JOIN " not in ranking and "started_at" not in ranking
    before = count()
    template = models.SessionFinding.objects.filter(session=_of(AUTO)).first()
    event = models.ContextEvent.objects.filter(kind="compaction").first()
    assert template is not None and event is not None
    for n in range(6):
        session = models.Session.objects.create(format="claude-code", title=f"more {n}", model="claude-opus-4-5")
        models.SessionFinding.objects.create(
            session=session, kind=template.kind, subject=template.subject, tokens=10, cost_usd=0.5, data=template.data
        )
        models.ContextEvent.objects.create(
            session=session, file=event.file, kind="compaction", seq=1, line=1, after_call=3, trigger="auto"
        )
    assert count() == before


def test_a_group_without_any_price_says_so_not_zero_dollars(client_in) -> None:
    # KHAELOR records no usage: its findings have no price, and the group showed "$0.00" beside "1 without a price".

    outcome = services.import_file(path=KHAELOR_SAMPLES / "ledger-migration.events.jsonl")
    assert isinstance(outcome, services.FileImport) and outcome.session is not None
    services.estimate_session_tokens(session_id=outcome.session)
    session = models.Session.objects.get(pk=outcome.session)
    services.store_findings(session=session, report=compute_diagnosis(session=session))
    page = client_in.get("/findings/?agent=khaelor").content.decode()
    group = page.split('<article class="finding-group"')[1].split("</article>")[0]
    assert '<span class="cost">no price</span>' in group and "without a price" in group
    assert "$0.00" not in group.split("<table")[0]
