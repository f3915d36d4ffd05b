"""Debug an overflow: what to change first, then the verdict and the evidence."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from sessions_app.selectors import diagnosis as diagnosis_selectors
from sessions_app.selectors import thresholds as threshold_selectors
from sessions_app.selectors.diagnosis import try_url
from sessions_app.views.cached import json_cached_until_session_changes
from sessions_app.views.sessions import _json, _session_or_404, wants_json


@require_GET
@json_cached_until_session_changes
def diagnosis(request: HttpRequest, session_id: int) -> HttpResponse:
    session = _session_or_404(session_id)
    report = diagnosis_selectors.diagnosis(session=session)  # shared by requests: copied where this view adds to it
    report = {
        **report,
        "recommendations": [
            {**r, "try_url": try_url(session.pk, r["proof"]) if r["proof"] else None} for r in report["recommendations"]
        ],
    }
    if wants_json(request):
        return _json(report)
    return render(request, "sessions/diagnosis.html", {"session": session, "d": report})


@require_GET
def thresholds_help(request: HttpRequest, agent: str) -> HttpResponse:
    """How one agent's lines, estimate and compaction rules are computed, in words a user can check."""
    try:
        explained = threshold_selectors.threshold_explanation(agent=agent)
    except LookupError:
        raise Http404(f"No agent {agent!r}.") from None
    if wants_json(request):
        return _json(explained)
    return render(request, "sessions/thresholds_help.html", {"agent": explained})
