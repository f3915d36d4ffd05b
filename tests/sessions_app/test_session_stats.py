"""One statistics definition: the session page, its JSON twin and ``manage.py session_stats`` agree."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.urls import reverse

from sessions_app import models, services
from tests.conftest import CLAUDE_SAMPLES, CODEX_SAMPLES, KHAELOR_SAMPLES, KLAUDE_SAMPLES

pytestmark = pytest.mark.django_db


def cli_stats(session: models.Session) -> dict:
    out = io.StringIO()
    call_command("session_stats", str(session.pk), "--json", stdout=out)
    return json.loads(out.getvalue())


def test_page_json_and_cli_json_agree_on_every_shared_sample(client_in):
    report = services.import_paths(
        paths=[CLAUDE_SAMPLES, KLAUDE_SAMPLES / "dot-klaude", KHAELOR_SAMPLES, CODEX_SAMPLES]
    )
    assert report.rejected == []
    sessions = list(models.Session.objects.order_by("id"))
    assert {s.format for s in sessions} == {value for value, _ in models.Session.FORMAT_CHOICES}
    disagreements = []
    for session in sessions:
        cli = cli_stats(session)
        page = client_in.get(reverse("sessions:detail_json", args=[session.pk])).json()["session"]
        shared = ("id", "format", "api_calls", "max_context")
        if {k: cli[k] for k in shared} != {k: page[k] for k in shared}:
            disagreements.append((session.pk, {k: cli[k] for k in shared}, {k: page[k] for k in shared}))
        main_events = [e["kind"] for e in cli["events"] if e["agent"] == "main"]
        if page["has_compaction"] != ("compaction" in main_events):
            disagreements.append((session.pk, "has_compaction", page["has_compaction"]))
        html = client_in.get(reverse("sessions:detail", args=[session.pk])).content.decode()
        # The overview's "API calls" tile, formatted as the page formats numbers.
        if f'<dt>API calls</dt><dd class="num">{cli["api_calls"]["main"]:,}' not in html:
            disagreements.append((session.pk, "page shows other call count", cli["api_calls"]))
    assert disagreements == []
    # The samples exercise both sides: calls and subagent calls were counted somewhere.
    assert any(s.api_calls_side for s in sessions) and any(s.api_calls_main for s in sessions)
