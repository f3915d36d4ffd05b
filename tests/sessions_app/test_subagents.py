"""Subagents everywhere (issue 37): inline (agent_progress copies) and file subagents are one kind of row, linked to
the call that started them, and every path that shows them (the session page, its JSON twin, the subagent partial,
``session_stats``, the HTML export, Usage) gives the same counts and costs, with each response priced once."""

from __future__ import annotations

import re
from decimal import Decimal
from io import StringIO
from pathlib import Path

import orjson
import pytest
from django.core.management import call_command
from django.urls import reverse

from sessions_app import models, services
from sessions_app.html_export import export_html
from sessions_app.selectors import usage as usage_selectors
from sessions_app.selectors.subagents import subagents
from tests.conftest import CLAUDE_SAMPLES, KHAELOR_SAMPLES
from tests.helpers.htmx import HTMX
from tests.helpers.subagent_sessions import COMPACT, FILE, FILE_REPLY, INLINE, INLINE_REPLY, subagent_session

pytestmark = pytest.mark.django_db


def _import(folder: Path) -> models.Session:
    report = services.import_paths(paths=[subagent_session(folder)])
    assert report.rejected == [] and all(not item.errors for item in report.imported)
    return models.Session.objects.get(files__agent="main")


def _text(html: str, element_id: str) -> str:
    found = re.search(rf'id="{element_id}">(.*?)</', html, re.S)
    assert found, element_id
    return " ".join(found.group(1).split())


def test_every_path_gives_the_same_subagents_and_each_response_is_priced_once(
    tmp_path, client_in, django_assert_max_num_queries
):
    session = _import(tmp_path)
    found = subagents(session=session)
    rows = found.by_agent()
    assert {(r.agent, r.kind, r.compaction, r.calls) for r in found.rows} == {
        (INLINE, "inline", False, 1),
        (FILE, "file", False, 1),
        (COMPACT, "file", True, 1),
    }
    assert rows[INLINE].spawn.tool_id == "toolu_inline" and rows[FILE].spawn.tool_id == "toolu_file"
    # The compaction request started where its first record points: after the last call before the compaction.
    assert rows[COMPACT].spawn.tool_id == "" and rows[COMPACT].spawn.call == 3
    # Counted once: the session's calls and cost are the main chain's and the subagents' together.
    assert (session.api_calls_main, session.api_calls_side) == (4, found.calls) == (4, 3)
    assert found.cost_usd is not None and session.cost_usd is not None and 0 < found.cost_usd < session.cost_usd
    # The total is the exact sum rounded once; each row is rounded on its own.
    assert float(sum(Decimal(str(r.cost_usd)) for r in found.rows)) == pytest.approx(found.cost_usd, abs=3e-6)

    twin = orjson.loads(client_in.get(reverse("sessions:detail_json", args=[session.pk])).content)
    out = StringIO()
    call_command("session_stats", str(session.pk), "--json", stdout=out)
    cli = orjson.loads(out.getvalue())
    assert twin["subagents"] == cli["subagents"] == orjson.loads(orjson.dumps(found.as_json()))
    assert twin["session"]["api_calls"] == cli["api_calls"] == {"main": 4, "side": 3}
    assert twin["session"]["cost_usd"] == cli["cost_usd"] == session.cost_usd

    # The page's Agents panel and the HTML export say the same sentence.
    page = client_in.get(reverse("sessions:detail", args=[session.pk])).content.decode()
    exported = "".join(export_html(session=session))
    line = _text(page, "subagent-totals")
    assert line == _text(exported, "subagent-totals")
    assert line.startswith("3 subagents (1 inline, 2 from their own files): 3 calls")
    assert f"${found.cost_usd:.2f} of the session's ${session.cost_usd:.2f}" in line
    # In the export each subagent opens at its call and links to its records further down the file.
    assert f'href="#agent-{INLINE}"' in exported and f'id="agent-{INLINE}"' in exported and INLINE_REPLY in exported

    # The partial the parent's transcript loads in place (a fixed number of queries), and its JSON twin.
    url = reverse("sessions:subagent", args=[session.pk])
    with django_assert_max_num_queries(24):
        partial = client_in.get(url, {"agent": INLINE}, **HTMX).content.decode()
    assert INLINE_REPLY in partial and "<html" not in partial
    assert FILE_REPLY in client_in.get(url, {"agent": FILE}, **HTMX).content.decode()
    partial_json = orjson.loads(client_in.get(url, {"agent": INLINE, "format": "json"}).content)
    assert partial_json["subagent"] == twin["subagents"]["rows"][0]
    assert client_in.get(url, {"agent": "nobody"}).status_code == 404

    # Usage gives the inline subagent apart, as ccusage (which skips it) needs, and the session's total whole.
    report = usage_selectors.usage_report(query=usage_selectors.UsageQuery(by="session"))
    (row,) = report.rows
    assert row.inline_subagents.cost_usd == rows[INLINE].cost_usd
    assert row.subagents.cost_usd == pytest.approx(rows[FILE].cost_usd + rows[COMPACT].cost_usd, abs=1e-6)
    assert report.totals.numbers.cost_usd == session.cost_usd


def test_a_subagent_file_imported_after_its_parent_replaces_the_copies_the_parent_carried(tmp_path):
    folder = subagent_session(tmp_path)
    main = next(folder.glob("*.jsonl"))
    # The inline subagent's own file turns up later (Claude Code writes both in 2.1.1x-2.1.8x).
    services.import_paths(paths=[main])
    session = models.Session.objects.get()
    assert subagents(session=session).by_agent()[INLINE].kind == "inline"
    own = folder / main.stem / "subagents" / f"agent-{INLINE}.jsonl"
    own.write_text(
        (folder / main.stem / "subagents" / f"agent-{FILE}.jsonl")
        .read_text()
        .replace(FILE, INLINE)
        .replace("msg_file_1", "msg_inline_1")
        .replace(FILE_REPLY, INLINE_REPLY)
    )
    services.import_paths(paths=[own])
    session.refresh_from_db()
    row = subagents(session=session).by_agent()[INLINE]
    assert (row.kind, row.calls) == ("file", 1)
    assert not models.ApiCall.objects.filter(session=session, agent=INLINE, carried=True).exists()
    assert models.Message.objects.filter(session=session, agent=INLINE).count() == 2  # the file's records only
    assert (session.api_calls_main, session.api_calls_side) == (4, 1)  # its one response counted once
    # The parent grows (a live session): copies it carries of a subagent that has its own file are not stored.
    with main.open("a") as f:
        f.write(main.read_text().splitlines(keepends=True)[3].replace('"p2"', '"p3"'))
    services.import_paths(paths=[main])
    session.refresh_from_db()
    assert models.SourceFile.objects.get(session=session, agent="main").lines == 12  # the new line was read
    assert models.Message.objects.filter(session=session, raw_type="progress").count() == 3
    assert models.Message.objects.filter(session=session, agent=INLINE).count() == 2
    assert (session.api_calls_main, session.api_calls_side) == (4, 1)


def _what_each_session_shows() -> list[dict[str, object]]:
    shown = []
    for session in models.Session.objects.order_by("id"):
        split = subagents(session=session)
        shown.append(
            {
                "files": sorted((f.agent, f.path, f.lines) for f in session.files.all()),
                "calls": (session.api_calls_main, session.api_calls_side),
                "records": models.Message.objects.filter(session=session).count(),
                "subagents": sorted((r.agent, r.kind, r.calls, r.tokens, r.cost_usd) for r in split.rows),
                "cost": (session.cost_usd, split.cost_usd),
            }
        )
    return shown


@pytest.mark.parametrize("grows", [False, True], ids=["then its parent", "then its parent, then it grows"])
def test_a_subagent_file_imported_before_its_parent_joins_it_as_an_import_of_both_does(tmp_path, grows):
    """Found growing the shared samples in odd chunks: a subagent file imported before its parent (the watcher saw
    the parent's first line half-written, or `import_sessions` was given the subagent file first) stayed a session of
    its own for good: two sessions, the parent's subagent inline, its calls and cost missing from the parent's."""
    folder = subagent_session(tmp_path)
    main = folder / f"{next(folder.glob('*.jsonl')).stem}.jsonl"
    own = folder / main.stem / "subagents" / f"agent-{FILE}.jsonl"
    full = own.read_bytes()
    lines = full.splitlines(keepends=True)
    own.write_bytes(b"".join(lines[:-1]) if grows else full)
    assert isinstance(services.import_file(path=own), services.FileImport)
    assert isinstance(services.import_file(path=main), services.FileImport)
    if grows:
        own.write_bytes(full)
        assert isinstance(services.import_file(path=own), services.FileImport)
    for other in sorted((folder / main.stem / "subagents").glob("*.jsonl")):
        services.import_file(path=other)
    grown = _what_each_session_shows()
    models.Session.objects.all().delete()
    services.import_paths(paths=[folder])
    assert grown == _what_each_session_shows()
    assert len(grown) == 1 and (FILE, "file", 1) in {row[:3] for row in grown[0]["subagents"]}


@pytest.mark.parametrize(
    "name", ["ccviewer_fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl", "cipherbox_c644f3afc869-1_full.jsonl"]
)
def test_the_agents_panel_and_usage_split_subagents_alike(client_in, name):
    # Claude Code 1.0.x wrote its subagents as isSidechain lines of the main file (docs/formats/claude-code.md §1):
    # neither copies in progress records nor files of their own. The Agents panel called them "5 inline" ($2.28) where
    # Usage, as ccusage, counts them with the subagents and gives inline subagents $0.
    services.import_paths(paths=[CLAUDE_SAMPLES / name])
    session = models.Session.objects.get()
    found = subagents(session=session)
    assert found.rows
    inline = sum((Decimal(str(r.cost_usd)) for r in found.rows if r.kind == "inline"), Decimal(0))
    others = sum((Decimal(str(r.cost_usd)) for r in found.rows if r.kind != "inline"), Decimal(0))
    report = usage_selectors.usage_report(query=usage_selectors.UsageQuery(by="session"))
    (row,) = report.rows
    assert row.inline_subagents.cost_usd == pytest.approx(float(inline), abs=3e-6)
    assert row.subagents.cost_usd == pytest.approx(float(others), abs=3e-6)
    assert row.inline_subagents.calls == sum(r.calls for r in found.rows if r.kind == "inline")
    # The sentence on the page names each kind as Usage counts it.
    line = _text(client_in.get(reverse("sessions:detail", args=[session.pk])).content.decode(), "subagent-totals")
    assert f"({found.count('inline')} inline, " in line
    assert found.as_json()["inline"] == found.count("inline")


def _agents_panel(html: str) -> str:
    found = re.search(r'<aside class="agents" id="agents".*?</aside>', html, re.S)
    assert found
    return " ".join(re.sub(r"<[^>]+>", " ", found.group(0)).split())


def test_the_agents_panel_names_the_compaction_request_as_the_overview_does(tmp_path, client_in):
    # It said "acompact-c0ffee subagent acompact-c0ffee", where the overview and the transcript call it the compaction.
    session = _import(tmp_path)
    page = client_in.get(reverse("sessions:detail", args=[session.pk])).content.decode()
    panel = _agents_panel(page)
    assert f"Compaction request compaction {COMPACT}" in panel and f"subagent {COMPACT}" not in panel
    overview = orjson.loads(client_in.get(reverse("sessions:detail_json", args=[session.pk])).content)["overview"]
    [shown] = [r for r in overview["subagent_costs"]["rows"] if r["agent"] == COMPACT]
    assert shown["compaction"]
    twin = orjson.loads(client_in.get(reverse("sessions:detail_json", args=[session.pk])).content)
    assert {a["agent"] for a in twin["agents"] if a["compaction"]} == {COMPACT}  # the JSON twin's panel says so too
    # A subagent the model started keeps its own name and type.
    assert f"read the config general-purpose {FILE} 1 call" in panel


def test_the_agents_panel_counts_the_calls_of_a_log_without_usage_as_every_page_does(client_in):
    # KHAELOR records no usage: its model's replies are its calls (api_calls_main) everywhere; the panel said 0.
    services.import_paths(paths=[KHAELOR_SAMPLES])
    session = models.Session.objects.get()
    services.estimate_session_tokens(session_id=session.pk)
    services.analyse_session(session_id=session.pk)
    session.refresh_from_db()
    assert session.api_calls_main > 0 and not models.ApiCall.objects.filter(session=session).exists()
    twin = orjson.loads(client_in.get(reverse("sessions:detail_json", args=[session.pk])).content)
    [main] = twin["agents"]
    assert main["calls"] == twin["session"]["api_calls"]["main"] == session.api_calls_main
    assert main["peak"] == twin["overview"]["peak"]["tokens"] == session.peak_context > 0 and main["peak_is_estimate"]
    panel = _agents_panel(client_in.get(reverse("sessions:detail", args=[session.pk])).content.decode())
    assert f"Main chain {session.api_calls_main} calls, peak ≈{session.peak_context:,}" in panel
