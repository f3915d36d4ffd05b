"""The Findings page across the archive: what costs money and what to change (selectors/findings.py), and the
compactions across sessions (selectors/compactions.py), with their JSON twin. The URL holds the page's state: the
session list's filters by the list's own names, the finding kind (``kind``) and the compactions' grouping (``by``)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from compaction.formats.registry import FORMAT_CHOICES
from sessions_app.middleware import json_error, wants_json
from sessions_app.selectors import compactions as compaction_selectors
from sessions_app.selectors import findings as finding_selectors
from sessions_app.selectors import sessions as session_selectors
from sessions_app.views.sessions import _list_filters


@require_GET
def findings(request: HttpRequest) -> HttpResponse:
    g = request.GET
    filters = _list_filters(g)
    kind = g.get("kind", "")
    by = g.get("by", "project")
    if kind and kind not in finding_selectors.KIND_LABELS:
        message = f"Unknown finding kind {kind!r}: choose from {', '.join(finding_selectors.KIND_LABELS)}."
        return _bad(request, message)
    try:
        compactions = compaction_selectors.compactions_report(filters=filters, by=by)
    except ValueError as exc:
        return _bad(request, str(exc))
    report = finding_selectors.findings_report(filters=filters, kind=kind)
    if wants_json(request):
        data = {**report.as_json(), "compactions": compactions.as_json()}
        return JsonResponse(data, json_dumps_params={"ensure_ascii": False})
    twin = g.copy()
    context = {
        "report": report,
        "compactions": compactions,
        "filters": filters,
        "kind": kind,
        "by": by,
        "kinds": list(finding_selectors.KIND_LABELS.items()),
        "groupings": compaction_selectors.GROUPINGS,
        "formats": FORMAT_CHOICES,
        "choices": session_selectors.filter_choices(),
        "twin_query": twin.urlencode(),
    }
    template = "sessions/findings.html#results" if getattr(request, "htmx", False) else "sessions/findings.html"
    return render(request, template, context)


def _bad(request: HttpRequest, message: str) -> HttpResponse:
    if wants_json(request):
        return json_error(message, status=400)
    return render(request, "400.html", {"message": message}, status=400)
