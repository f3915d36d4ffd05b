"""One session, one bill: the surfaces test_consistency.py leaves out (Usage and its CSV, the HTML export's head, the
Findings report, ``compactions --json``) give each session's cost, calls, subagents, compactions and findings as its
own page and ``session_stats`` do, for every shared sample of all four agents.

Money is compared to the micro-dollar: every surface rounds the one exact sum (``compaction.costs``), so a float sum
anywhere shows up here as a last digit off.
"""

from __future__ import annotations

import csv
import io
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest
from django.core.management import call_command

from sessions_app import models, services
from sessions_app.html_export import export_html
from tests.conftest import AGENT_SAMPLE_FOLDERS

pytestmark = pytest.mark.django_db


def _command(*args: str) -> Any:
    out = io.StringIO()
    call_command(*args, "--json", stdout=out)
    return orjson.loads(out.getvalue())


def _web(client: Any, url: str) -> Any:
    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return orjson.loads(response.content)


def _analysed(folder: Path) -> list[models.Session]:
    report = services.import_paths(paths=[folder])
    assert not report.rejected, report.rejected
    for session in models.Session.objects.all():
        services.estimate_session_tokens(session_id=session.pk)
        services.analyse_session(session_id=session.pk)
    return list(models.Session.objects.order_by("id"))


def _export_head(session: models.Session) -> dict[str, str]:
    html = "".join(export_html(session=session))
    head = html.split('<dl class="facts">')[1].split("</dl>")[0]
    return {
        dt: " ".join(re.sub(r"<[^>]+>", " ", dd).split())
        for dt, dd in re.findall(r"<dt>(.*?)</dt><dd[^>]*>(.*?)</dd>", head, re.S)
    }


def _usd(value: float | None) -> Decimal:
    return Decimal(str(value or 0))


@pytest.mark.slow
@pytest.mark.parametrize("agent", sorted(AGENT_SAMPLE_FOLDERS))
def test_usage_export_findings_and_compactions_bill_each_session_as_its_page_does(client_in, agent: str) -> None:
    sessions = _analysed(AGENT_SAMPLE_FOLDERS[agent])
    assert sessions
    usage = {row["session"]: row for row in _web(client_in, "/usage.json?by=session")["rows"]}
    assert usage == {row["session"]: row for row in _command("usage", "--by", "session")["rows"]}
    usage_csv = {row["group"]: row for row in csv.DictReader(io.StringIO(client_in.get("/usage.csv?by=session").text))}
    listed = {s["id"]: s for s in _web(client_in, "/sessions.json?per_page=50")["sessions"]}
    compactions = _command("compactions")["compactions"]
    findings = _command("findings")
    assert findings == {k: v for k, v in _web(client_in, "/findings.json").items() if k != "compactions"}
    at_stake: dict[tuple[str, str], list[Any]] = {}

    for session in sessions:
        sid, where = str(session.pk), f"{agent} session {session.pk} ({session.title[:40]!r})"
        stats = _command("session_stats", sid)
        page = _web(client_in, f"/sessions/{sid}.json")
        cost = stats["cost_usd"]
        assert page["session"]["cost_usd"] == listed[session.pk]["cost_usd"] == cost, where

        # Usage: the session's row is its bill, calls and tokens by kind, its subagents split as the page splits them.
        row = usage.get(session.pk)
        if row is None:
            assert not models.UsageCell.objects.filter(session=session).exists(), where
        else:
            assert row["cost_usd"] == cost, where
            assert row["calls"] == stats["api_calls"]["main"] + stats["api_calls"]["side"], where
            for kind in ("input_tokens", "output_tokens", "cache_creation_tokens", "cache_read_tokens"):
                assert row[kind] == stats["usage"][kind], (where, kind)
            subagents = stats["subagents"]["rows"]
            inline = sum((_usd(r["cost_usd"]) for r in subagents if r["kind"] == "inline"), Decimal(0))
            others = sum((_usd(r["cost_usd"]) for r in subagents if r["kind"] != "inline"), Decimal(0))
            assert abs(_usd(row["inline_subagents"]["cost_usd"]) - inline) <= Decimal("0.000003"), where
            assert abs(_usd(row["subagents"]["cost_usd"]) - others) <= Decimal("0.000003"), where
            assert row["inline_subagents"]["calls"] == sum(r["calls"] for r in subagents if r["kind"] == "inline")
            in_csv = usage_csv[row["group"]]
            assert in_csv["cost_usd"] == ("" if cost is None else f"{cost:.6f}"), where
            assert int(in_csv["calls"]) == row["calls"], where

        # The glance's subagents and main chain add up to the session's total.
        glance = page["overview"]["subagent_costs"]
        assert glance["session_cost_usd"] == cost, where
        if cost is not None:
            assert abs(_usd(glance["main_cost_usd"]) + _usd(glance["subagents_cost_usd"]) - _usd(cost)) <= Decimal(
                "0.000001"
            ), where

        # The HTML export's head: the page's calls, compactions and cost.
        head = _export_head(session)
        calls = page["overview"]["api_calls"]
        assert head["Calls"] == f"{calls['main']:,} (main chain), {calls['side']:,} (others)", where
        assert head["Compactions"] == f"{page['overview']['compactions']:,}", where
        assert head.get("Cost") == (None if cost is None else f"${cost:,.2f}"), where

        # compactions --json: the session's recorded compactions at the same points, with the same contexts.
        recorded = [
            (e["after_call"], e["context_before"], e["context_after"])
            for e in stats["events"]
            if e["kind"] == "compaction" and e["agent"] == "main"
        ]
        listed_compactions = sorted(
            (c["after_call"], c["context_before"], c["context_after"])
            for c in compactions
            if c["session"] == session.pk
        )
        assert listed_compactions == recorded, where

        # Findings: the diagnosis's findings are the ones the Findings report adds up.
        for finding in _command("diagnose", sid)["recommendations"]:
            at_stake.setdefault((finding["kind"], finding.get("subject") or ""), []).append(finding)

    groups = {(g["kind"], g["subject"]): g for g in findings["groups"]}
    assert set(groups) == set(at_stake)
    for key, found in at_stake.items():
        group = groups[key]
        assert group["sessions"] == len(found) and group["tokens"] == sum(f["tokens"] for f in found), key
        priced = sum((_usd(f["cost_usd"]) for f in found if f["cost_usd"] is not None), Decimal(0))
        assert abs(_usd(group["cost_usd"]) - priced) <= Decimal("0.000001") * len(found), key
        assert group["unpriced"] == sum(1 for f in found if f["cost_usd"] is None), key
