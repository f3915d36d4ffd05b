from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse
from django.utils.functional import SimpleLazyObject


def _session_links(request: HttpRequest) -> list[dict[str, str]]:
    """Buttons on a session page (``session_links`` in sessions/detail.html): the tools for this session."""
    match = request.resolver_match
    session_id = match.kwargs.get("session_id") if match else None
    if session_id is None:
        return []
    try:
        return [{"label": "Preview compaction", "url": reverse("sessions:preview", args=[session_id])}]
    except NoReverseMatch:
        return []


def navigation(request: HttpRequest) -> dict[str, object]:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    from sessions_app.selectors import runs as run_selectors

    try:
        reviews_url = reverse("sessions:reviews")
    except NoReverseMatch:
        return {}
    return {
        "nav_reviews_url": reviews_url,
        # Lazy: one COUNT query, only when a template shows it (htmx fragments do not).
        "nav_pending_reviews": SimpleLazyObject(run_selectors.pending_review_count),
        "session_links": _session_links(request),
    }


def agents(request: HttpRequest) -> dict[str, object]:
    """The version of the agents' generated stylesheet (base.html's link to it), on every page."""
    from sessions_app.views.agents import agents_css_version

    return {"agents_css_version": SimpleLazyObject(agents_css_version)}
