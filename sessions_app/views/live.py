"""The live-status region of a session page or timeline: polled by htmx, it tells the page when the session grew."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from sessions_app.selectors import live as live_selectors
from sessions_app.selectors import overview as overview_selectors
from sessions_app.views.sessions import _json, _session_or_404, wants_json
from sessions_app.views.timeline import _timeline_data

# A session that is not live is still polled, slowly, so a resumed session comes back to life on an open page.
IDLE_POLL_SECONDS = 30


def _count(value: str | None) -> int | None:
    return int(value) if value and value.isdigit() else None


@require_GET
def live_status(request: HttpRequest, session_id: int) -> HttpResponse:
    session = _session_or_404(session_id)
    status = live_selectors.live_status(session=session)
    if wants_json(request):
        return _json(status.as_json())
    seen = request.GET.get("seen")
    seen_crossings = _count(request.GET.get("crossings"))
    seen_events = _count(request.GET.get("events"))
    context = {
        "session": session,
        "status": status,
        "poll_seconds": settings.LIVE_POLL_SECONDS if status.live else IDLE_POLL_SECONDS,
        # Crossings the page has not shown yet are marked as new (the first render marks none).
        "new_crossings": len(status.crossings) - seen_crossings if seen_crossings is not None else 0,
        # Likewise events: the page passes how many it has seen, so each is announced once, on the poll that finds it.
        "new_events": max(status.events - seen_events, 0) if seen_events is not None else 0,
        "warning_crossing": status.last_crossing("warning"),
        "autocompact_crossing": status.last_crossing("autocompact"),
    }
    response = render(request, "sessions/_live.html", context)
    if seen is not None and seen != status.version:
        # htmx raises this event on the page: the transcript and the chart fetch what was added.
        response["HX-Trigger"] = "session-grew"
    return response


@require_GET
def live_overview(request: HttpRequest, session_id: int) -> HttpResponse:
    """The session page's overview, fetched again when the session grew (``detail.html#overview``); while the
    worker recomputes the analysis of the new version it says "computing" and fetches itself until it lands."""
    session = _session_or_404(session_id)
    context = {
        "session": session,
        "overview": overview_selectors.overview(session=session),
        "overview_poll_seconds": settings.LIVE_POLL_SECONDS,
    }
    return render(request, "sessions/detail.html#overview", context)


@require_GET
def live_timeline(request: HttpRequest, session_id: int) -> HttpResponse:
    """The timeline page's numbers (its caption, cost and event list), fetched again when the session grew; the
    chart fetches its own data (static/timeline.js). The page's query string comes along: the same thresholds,
    and the same cached data as the page and its JSON (views/timeline.py)."""
    session = _session_or_404(session_id)
    data = _timeline_data(request, session)
    context = {"session": session, "timeline": data}
    return render(request, "sessions/timeline.html#live_numbers", context)
