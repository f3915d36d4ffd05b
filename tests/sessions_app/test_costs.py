"""Stored sessions: ``session_stats --json`` usage and cost equal an independent reading of the imported files."""

from __future__ import annotations

import io
import json
from decimal import Decimal
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse

from sessions_app import models, services
from tests.compaction.cost_oracle import independent_responses, package_cost
from tests.conftest import CLAUDE_SAMPLES, KHAELOR_SAMPLES

pytestmark = pytest.mark.django_db


def test_every_claude_code_session_costs_what_its_files_say(client_in):
    report = services.import_paths(paths=[CLAUDE_SAMPLES])
    assert report.rejected == []
    sessions = list(models.Session.objects.filter(format="claude-code").order_by("id"))
    assert sessions
    checked_subagents = False
    for session in sessions:
        # Each response once by message.id over all of the session's files (main and subagents).
        responses: dict[str, dict] = {}
        paths = list(models.SourceFile.objects.filter(session=session).values_list("path", flat=True))
        checked_subagents |= len(paths) > 1
        for path in paths:
            for key, row in independent_responses(Path(path)).items():
                if key in responses:
                    responses[key]["output"] = max(responses[key]["output"], row["output"])
                else:
                    responses[key] = dict(row)
        out = io.StringIO()
        call_command("session_stats", str(session.pk), "--json", stdout=out)
        stats = json.loads(out.getvalue())
        assert stats["usage"]["input_tokens"] == sum(r["input"] for r in responses.values()), session
        assert stats["usage"]["cache_creation_tokens"] == sum(r["created"] for r in responses.values())
        assert stats["usage"]["cache_read_tokens"] == sum(r["read"] for r in responses.values())
        assert stats["usage"]["output_tokens"] == sum(r["output"] for r in responses.values())
        expected = float(sum((package_cost(r) for r in responses.values()), Decimal(0)))
        assert stats["cost_usd"] == pytest.approx(expected, abs=1e-6)
        session.refresh_from_db()
        assert session.cost_usd == pytest.approx(expected, abs=1e-6)
    assert checked_subagents  # spotter: a session file and its subagents/ folder
    # The list sorts by cost, most expensive first.
    listed = client_in.get("/", {"format": "json", "sort": "cost"}).json()["sessions"]
    costs = [s["cost_usd"] for s in listed if s["cost_usd"] is not None]
    assert costs == sorted(costs, reverse=True) and len(costs) == len(sessions)


def test_the_session_page_and_list_show_the_cost(client_in):
    outcome = services.import_file(path=CLAUDE_SAMPLES / "entirecli_a6e4c2a0fbd1-0_full.jsonl")
    session = models.Session.objects.get(pk=outcome.session)
    assert session.cost_usd is not None and session.cost_usd > 0
    shown = f"${session.cost_usd:,.2f}"
    assert shown in client_in.get(reverse("sessions:detail", args=[session.pk])).content.decode()
    assert shown in client_in.get("/").content.decode()


def test_the_cost_header_keeps_the_filters_and_toggles_the_order(client_in):
    import html
    import re

    page = client_in.get("/", {"agent": "claude-code", "q": "x", "page": "2"}).content.decode()
    href = html.unescape(re.search(r'href="\?([^"]*)" class="sort-cost"', page).group(1))
    assert "agent=claude-code" in href and "q=x" in href and "sort=cost" in href and "page=" not in href
    again = client_in.get("/", {"agent": "claude-code", "sort": "cost"}).content.decode()
    assert "sort=-cost" in html.unescape(re.search(r'href="\?([^"]*)" class="sort-cost"', again).group(1))


def test_session_stats_gives_one_cost_in_its_total_its_breakdown_and_its_models():
    # The total was the exact sum rounded once, its breakdown and its rows per model float sums: the agentv session
    # cost $0.712858 beside a breakdown "total" of $0.712857 and its one model's row of $0.712857.
    services.import_paths(paths=[CLAUDE_SAMPLES])
    checked = 0
    for session in models.Session.objects.exclude(cost_usd=None).exclude(api_calls_main=0):
        out = io.StringIO()
        call_command("session_stats", str(session.pk), "--json", stdout=out)
        stats = json.loads(out.getvalue())
        assert stats["cost"]["total"] == stats["cost_usd"] == session.cost_usd, session.title
        if len(stats["by_model"]) == 1:
            assert stats["by_model"][0]["cost_usd"] == stats["cost_usd"], session.title
            checked += 1
    assert checked


def test_a_log_that_records_no_usage_has_no_cost_rather_than_a_free_one(client_in):
    # The KHAELOR sample's 28 model replies recorded no usage: they cost money no one knows, yet the list, the page,
    # the export and session_stats said $0.00 (and the list sorted it as the cheapest session).
    services.import_paths(paths=[KHAELOR_SAMPLES])
    session = models.Session.objects.get()
    assert session.api_calls_main > 0 and not models.ApiCall.objects.filter(session=session).exists()
    assert session.cost_usd is None
    out = io.StringIO()
    call_command("session_stats", str(session.pk), "--json", stdout=out)
    stats = json.loads(out.getvalue())
    assert stats["cost_usd"] is None and stats["unpriced_models"]
    page = client_in.get(reverse("sessions:detail_json", args=[session.pk])).json()
    assert page["session"]["cost_usd"] is None and page["overview"]["cost_usd"] is None
