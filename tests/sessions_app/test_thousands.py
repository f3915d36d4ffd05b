"""Thousands separators in every table (issue 11): the timeline's recorded and replayed rows, the run tables."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from sessions_app import models, services
from tests.conftest import CLAUDE_SAMPLES

pytestmark = pytest.mark.django_db


def test_the_timeline_tables_group_thousands(spotter: models.Session, client_in: Client) -> None:
    assert spotter.peak_context >= 1000
    body = client_in.get(f"/sessions/{spotter.pk}/timeline/", {"replay": "claude-code"}).content.decode()
    row = re.search(r"<tr><td>Recorded \(what happened\)</td>.*?</tr>", body, re.S)
    assert row and f"{spotter.peak_context:,}" in row.group()
    cells = re.findall(r'<td class="num">([^<]*)</td>', body)
    assert cells and not [c for c in cells if re.fullmatch(r"-?\d{4,}", c.strip())]


def test_the_diagnosis_notes_and_cache_causes_group_thousands(client_in: Client) -> None:
    # "idle 1001 min > 60 min cache lifetime" and "window=200000, reserve=min(32000, 20000)" in the notes, where the
    # same formula one line above had its separators; and an agent of one record said "1 records".

    idle = services.import_file(path=CLAUDE_SAMPLES / "entireskills_4982335ad847-0_raw_transcript.jsonl")
    assert isinstance(idle, services.FileImport)
    page = client_in.get(f"/sessions/{idle.session}/diagnosis/").content.decode()
    assert "idle 1,001 min &gt; 60 min cache lifetime" in page and "idle 1001 min" not in page

    lone = services.import_file(path=CLAUDE_SAMPLES / "sniffly_ff71dbed-a4f2-4284-a4fc-fe2fb90de929.jsonl")
    assert isinstance(lone, services.FileImport)
    page = client_in.get(f"/sessions/{lone.session}/diagnosis/").content.decode()
    notes = "".join(re.findall(r'<p class="note">(.*?)</p>', page))
    assert "window=200,000, reserve=min(32,000, 20,000)" in notes and "200000" not in notes
    assert "0 calls, 1 record<" in client_in.get(f"/sessions/{lone.session}/").content.decode()
