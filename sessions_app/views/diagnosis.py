"""Debug an overflow: the verdict first, then the evidence."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from sessions_app import selectors
from sessions_app.views.cached import json_cached_until_session_changes
from sessions_app.views.sessions import _json, _session_or_404, wants_json


@require_GET
@json_cached_until_session_changes
def diagnosis(request: HttpRequest, session_id: int) -> HttpResponse:
    session = _session_or_404(session_id)
    report = selectors.diagnosis(session=session)
    if wants_json(request):
        return _json(report)
    return render(request, "sessions/diagnosis.html", {"session": session, "d": report})
