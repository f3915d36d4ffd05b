"""The session list at scale (bench/list_bench.py measures 10,000 sessions): a page costs the same few queries
whatever the filters, the sort and the page, and the date filters compare the indexed column as a range of days."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from bench.list_bench import QUERIES, generate
from sessions_app import models

pytestmark = pytest.mark.django_db


def test_every_filter_and_sort_costs_the_same_queries(client_in) -> None:
    generate(120)  # more than a page (PER_PAGE = 50)
    counts = {}
    for label, query in QUERIES:
        with CaptureQueriesContext(connection) as queries:
            response = client_in.get("/" + query.replace("page=100", "page=3"))
        assert response.status_code == 200, label
        counts[label] = len(queries.captured_queries)
    assert len(set(counts.values())) == 1, counts
    assert max(counts.values()) <= 8, counts


def test_date_filters_include_whole_days_at_their_edges(client_in) -> None:
    day = datetime(2025, 6, 1, tzinfo=UTC)
    moments = [
        day - timedelta(microseconds=1),
        day,
        day + timedelta(hours=23, minutes=59, seconds=59),
        day + timedelta(days=1),
    ]
    made = [
        models.Session.objects.create(format="claude-code", external_id=f"edge-{i}", started_at=at)
        for i, at in enumerate(moments)
    ]
    listed = client_in.get("/sessions.json?since=2025-06-01&until=2025-06-01").json()["sessions"]
    assert sorted(s["id"] for s in listed) == sorted(s.pk for s in made[1:3])
