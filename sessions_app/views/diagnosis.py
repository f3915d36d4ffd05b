"""Debug an overflow: what to change first, then the verdict and the evidence."""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from compaction.after_compaction import DEFAULT_CALLS
from sessions_app import memory_budget
from sessions_app.selectors import after_compaction as after_compaction_selectors
from sessions_app.selectors import diagnosis as diagnosis_selectors
from sessions_app.selectors import thresholds as threshold_selectors
from sessions_app.selectors.parameters import parameter_fields
from sessions_app.views.cached import json_cached_until_session_changes
from sessions_app.views.sessions import _json, _session_or_404, wants_json


@require_GET
@json_cached_until_session_changes
def diagnosis(request: HttpRequest, session_id: int) -> HttpResponse:
    session = _session_or_404(session_id)
    report = diagnosis_selectors.diagnosis(session=session)  # shared by requests: copied where this view adds to it
    report = {
        **report,
        "recommendations": diagnosis_selectors.served_recommendations(session=session),
        "after_compaction": _after_compaction(session),
    }
    if wants_json(request):
        return _json(report)
    return render(request, "sessions/diagnosis.html", {"session": session, "d": report})


def _after_compaction(session: Any) -> dict[str, Any] | None:
    """The stored report's, or measured now for a report stored before it had one; None when too large to read."""
    try:
        return after_compaction_selectors.after_compaction(session=session)
    except memory_budget.SessionTooLarge:
        return None


@require_GET
def thresholds_help(request: HttpRequest, agent: str) -> HttpResponse:
    """How one agent's lines, estimate and compaction rules are computed, in words a user can check."""
    try:
        explained = threshold_selectors.threshold_explanation(agent=agent)
    except LookupError:
        raise Http404(f"No agent {agent!r}.") from None
    if wants_json(request):
        return _json(explained)
    # The settings as the what-if form names them (label, unit, default in words: "on", "from the session"), never a
    # snake_case key beside a Python True.
    settings_rows = parameter_fields(strategy=agent, values={}, defaults=explained["parameters"])
    return render(request, "sessions/thresholds_help.html", {"agent": explained, "settings_rows": settings_rows})


@require_GET
def after_compaction_archive(request: HttpRequest) -> HttpResponse:
    """Every session with a compaction and what the agent did again after its compactions, in totals (JSON)."""
    return _json({"calls": DEFAULT_CALLS, "sessions": after_compaction_selectors.archive_after_compaction()})
