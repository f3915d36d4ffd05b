"""The JSON cache keeps nothing for an answer it does not serve again (sessions_app/views/cached.py)."""

from __future__ import annotations

import pytest
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.test import RequestFactory

from sessions_app import services
from sessions_app.views import cached
from tests.helpers.claude_code_lines import small_session


def _refusing_view(request: HttpRequest, session_id: int) -> HttpResponse:
    return JsonResponse({"error": "bad parameters"}, status=400)


def _failing_view(request: HttpRequest, session_id: int) -> HttpResponse:
    raise RuntimeError("the analysis broke")


@pytest.mark.django_db
def test_a_refused_answer_leaves_no_entry(tmp_path):
    session_id = services.import_file(path=small_session(tmp_path)).session
    cached.JSON_ANSWERS.clear()
    view = cached.json_cached_until_session_changes(_refusing_view)
    for query in range(3):
        response = view(RequestFactory().get("/x.json", {"q": str(query)}), session_id)
        assert response.status_code == 400
    assert cached.JSON_ANSWERS.computing() == 0
    assert len(cached.JSON_ANSWERS) == 0


@pytest.mark.django_db
def test_a_view_that_raises_leaves_no_entry(tmp_path):
    session_id = services.import_file(path=small_session(tmp_path)).session
    cached.JSON_ANSWERS.clear()
    view = cached.json_cached_until_session_changes(_failing_view)
    with pytest.raises(RuntimeError):
        view(RequestFactory().get("/x.json"), session_id)
    assert cached.JSON_ANSWERS.computing() == 0
    assert len(cached.JSON_ANSWERS) == 0
