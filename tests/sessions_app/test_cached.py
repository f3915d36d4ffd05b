"""JSON twins served again while their session is unchanged (sessions_app/views/cached.py)."""

from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from sessions_app import services
from sessions_app.views import cached
from tests.helpers.claude_code_lines import small_session


def test_an_answer_is_kept_under_a_bounded_key_whatever_its_query(client_in, tmp_path):
    session_id = services.import_file(path=small_session(tmp_path)).session
    url = reverse("sessions:diagnosis_json", args=[session_id])
    long_query = {"note": "x" * 400, "a": "1", "b": "2"}
    first = client_in.get(url, long_query)
    with CaptureQueriesContext(connection) as queries:
        again = client_in.get(url, dict(reversed(long_query.items())))  # the same query, in another order
    assert first.status_code == again.status_code == 200
    assert again.content == first.content
    assert all(len(key) < 250 for key in cached.JSON_ANSWERS._entries)  # hashed, whatever the query's length
    assert not [q for q in queries.captured_queries if "sessions_app_message" in q["sql"]]  # served, not computed
