"""Thousands separators in every table (issue 11): the timeline's recorded and replayed rows, the run tables."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from sessions_app import models

pytestmark = pytest.mark.django_db


def test_the_timeline_tables_group_thousands(spotter: models.Session, client_in: Client) -> None:
    assert spotter.peak_context >= 1000
    body = client_in.get(f"/sessions/{spotter.pk}/timeline/", {"replay": "claude-code"}).content.decode()
    row = re.search(r"<tr><td>Recorded \(what happened\)</td>.*?</tr>", body, re.S)
    assert row and f"{spotter.peak_context:,}" in row.group()
    cells = re.findall(r'<td class="num">([^<]*)</td>', body)
    assert cells and not [c for c in cells if re.fullmatch(r"-?\d{4,}", c.strip())]
