"""The token timeline of a session: chart page, JSON twin, and the detail of one API call."""

from __future__ import annotations

from typing import Any

import orjson
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from compaction.strategies.registry import STRATEGY_LABELS, STRATEGY_NAMES
from compaction.transcript import MAIN
from sessions_app import models, selectors
from sessions_app.views.sessions import HtmxHttpRequest, _json, _session_or_404, wants_json


def _strategy(request: HttpRequest) -> str | None:
    name = request.GET.get("strategy") or None
    return name if name in STRATEGY_NAMES else None


def _page_context(session: models.Session, data: dict[str, Any]) -> dict[str, Any]:
    return {
        "session": session,
        "timeline": data,
        "strategies": [(n, STRATEGY_LABELS[n]) for n in STRATEGY_NAMES],
        "strategy": data["thresholds"]["strategy"],
        "main_points": len(data["series"].get(MAIN, [])),
    }


@require_GET
def timeline(request: HttpRequest, session_id: int) -> HttpResponse:
    session = _session_or_404(session_id)
    data = selectors.timeline(session=session, strategy=_strategy(request))
    if wants_json(request):
        return _json(data)
    return render(request, "sessions/timeline.html", _page_context(session, data))


@require_GET
def turn(request: HtmxHttpRequest, session_id: int) -> HttpResponse:
    session = _session_or_404(session_id)
    agent = request.GET.get("agent", MAIN)
    try:
        call = int(request.GET.get("call", ""))
        detail = selectors.turn_detail(session=session, agent=agent, call=call)
    except (ValueError, models.ApiCall.DoesNotExist):
        raise Http404("No such API call in this session.") from None
    if wants_json(request):
        return _json(detail)
    composition_json = orjson.dumps(detail["composition"]).decode()
    if request.htmx:
        context = {"session": session, "turn": detail, "composition_json": composition_json}
        return render(request, "sessions/timeline.html#turn", context)
    # Without JavaScript a point link opens the whole page with this call's detail filled in.
    data = selectors.timeline(session=session, strategy=_strategy(request))
    context = {**_page_context(session, data), "turn": detail, "composition_json": composition_json}
    return render(request, "sessions/timeline.html", context)
