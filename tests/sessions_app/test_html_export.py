"""The shareable HTML file (sessions_app/html_export.py): its route, its command, and the memory budget's refusal.
The browser test (tests/browser/test_export_html.py) opens it offline."""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from sessions_app import models, services
from sessions_app.html_export import export_html
from tests.conftest import CLAUDE_SAMPLES, KHAELOR_SAMPLES
from tests.helpers.claude_code_lines import assistant, user, write

AWS_KEY = "AKIA" + "Q7RZ3X5T2W9Y4U6V"  # in parts: no scanner takes this file itself for a leak

pytestmark = pytest.mark.django_db


@pytest.fixture
def leaky(tmp_path):
    path = write(
        tmp_path,
        "s-1.jsonl",
        user("u1", None, f"deploy with AWS_ACCESS_KEY_ID={AWS_KEY} please"),
        assistant("a1", "u1", "msg_1", "Deployed.", ctx=1000),
        # Longer than a page shows before its "show all" link: the file, with no server to ask, has it whole.
        user("u2", "a1", "log: " + "line\n" * 1000 + "the end of a long prompt"),
    )
    outcome = services.import_file(path=path)
    assert isinstance(outcome, services.FileImport)
    return outcome.session


def test_the_session_page_links_the_download_and_the_route_streams_the_masked_file(client_in, leaky, settings):
    page = client_in.get(f"/sessions/{leaky}/").content.decode()
    assert f'href="/sessions/{leaky}/export.html" download' in page
    response = client_in.get(f"/sessions/{leaky}/export.html")
    assert response.status_code == 200 and response.streaming
    assert response["Content-Disposition"] == f'attachment; filename="session-{leaky}.html"'
    body = b"".join(response.streaming_content).decode()
    assert AWS_KEY not in body and "deploy with AWS_ACCESS_KEY_ID=[masked AWS Access Key] please" in body
    assert "<td>AWS Access Key</td><td>record #0 (main chain)</td>" in body
    assert "the end of a long prompt" in body and "show all (" not in body
    assert "<script" not in body and 'rel="stylesheet"' not in body and "default-src 'none'" in body
    # Over the memory budget: the budget's page and status, before any byte of a file.
    settings.ANALYSIS_MAX_SESSION_BYTES = 10
    refused = client_in.get(f"/sessions/{leaky}/export.html")
    assert refused.status_code == 413 and b"ANALYSIS_MAX_SESSION_BYTES" in refused.content


def test_the_command_writes_the_file_and_refuses_a_session_over_the_budget_leaving_nothing(
    leaky, tmp_path, settings, capsys
):
    out = tmp_path / "shared.html"
    call_command("export_html", str(leaky), "-o", str(out))
    assert f"wrote {out}" in capsys.readouterr().out
    text = out.read_text()
    assert AWS_KEY not in text and "[masked AWS Access Key]" in text and "Deployed." in text

    settings.ANALYSIS_MAX_SESSION_BYTES = 10
    refused = tmp_path / "refused.html"
    with pytest.raises(CommandError, match="ANALYSIS_MAX_SESSION_BYTES"):
        call_command("export_html", str(leaky), "-o", str(refused))
    assert list(tmp_path.glob("refused.html*")) == []


NO_CALLS = CLAUDE_SAMPLES / "sniffly_ff71dbed-a4f2-4284-a4fc-fe2fb90de929.jsonl"  # a summary, no API call


def _facts(html: str) -> dict[str, str]:
    """The export's head, dt -> dd, as words."""
    head = html.split('<dl class="facts">')[1].split("</dl>")[0]
    return {
        dt: " ".join(re.sub(r"<[^>]+>", " ", dd).split())
        for dt, dd in re.findall(r"<dt>(.*?)</dt><dd[^>]*>(.*?)</dd>", head, re.S)
    }


def test_the_exports_head_says_what_the_session_page_says_of_its_peak():
    # The export printed a log without usage's estimated peak as if recorded, and "0 tokens at call None" for a log
    # without calls, where the session page says "≈72,891 ... (estimate)" and names no call.
    services.import_paths(paths=[KHAELOR_SAMPLES, NO_CALLS])
    estimated = models.Session.objects.get(format="khaelor")
    # Before the worker's analysis it has no peak yet: said, not "no API call" (it has 28) nor a made-up number.
    services.estimate_session_tokens(session_id=estimated.pk)
    facts = _facts("".join(export_html(session=models.Session.objects.get(pk=estimated.pk))))
    assert facts["Peak"].startswith("not counted: the worker has not yet counted") and "None" not in facts["Peak"]
    for session in models.Session.objects.all():
        services.estimate_session_tokens(session_id=session.pk)
        services.analyse_session(session_id=session.pk)
    estimated.refresh_from_db()
    facts = _facts("".join(export_html(session=estimated)))
    assert facts["Peak"].startswith(f"≈{estimated.peak_context:,} tokens at call {estimated.peak_call} ")
    assert "(estimate)" in facts["Peak"]
    empty = models.Session.objects.get(api_calls_main=0)
    facts = _facts("".join(export_html(session=empty)))
    assert "None" not in facts["Peak"] and facts["Peak"].startswith("no API call recorded")


def test_the_peak_line_says_when_there_is_no_call_and_labels_an_estimated_peak(client_in, tmp_path):
    # A log of one prompt and no reply: no call, so no "call None"; a KHAELOR log without usage: its peak estimated.
    lone = services.import_file(path=write(tmp_path, "s-2.jsonl", user("u1", None, "hello")))
    assert isinstance(lone, services.FileImport)
    body = b"".join(client_in.get(f"/sessions/{lone.session}/export.html").streaming_content).decode()
    assert "<dt>Peak</dt><dd>no API call recorded (a 200,000 window)</dd>" in body and "None" not in body

    khaelor = services.import_file(path=KHAELOR_SAMPLES / "ledger-migration.events.jsonl")
    assert isinstance(khaelor, services.FileImport)
    services.estimate_session_tokens(session_id=khaelor.session)
    services.analyse_session(session_id=khaelor.session)
    body = b"".join(client_in.get(f"/sessions/{khaelor.session}/export.html").streaming_content).decode()
    peak = body.split("<dt>Peak</dt><dd>")[1].split("</dd>")[0]
    assert peak.startswith("≈") and "(estimate)" in peak
    # Its timeline: the estimated series its pages draw, labelled, not "No recorded API calls" beside 28 calls.
    estimated = models.Session.objects.get(pk=khaelor.session)
    svg = body.split('<svg class="export-timeline"')[1].split("</svg>")[0]
    assert f"(estimated), {estimated.api_calls_main:,} calls, peak ≈{estimated.peak_context:,} tokens" in svg
    assert "estimated: this log records no usage" in svg and "stroke-dasharray" in svg
